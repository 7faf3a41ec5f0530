# What the Makefiles of the Promela models (this folder's, server/engine/model/) share. A model's
# Makefile sets MODEL (its .pml file) and CHECKS (its check targets, each running run-pan.sh),
# includes this file before its first rule, then writes one rule per check.

SPIN  ?= spin
PANCC ?= gcc
JOBS  ?= 2
export SPIN PANCC MODEL

.PHONY: verify clean $(CHECKS)

verify:
	@$(MAKE) --no-print-directory -j$(JOBS) $(CHECKS)
	@echo "$(MODEL): all $(words $(CHECKS)) checks gave the expected outcome"

clean:
	rm -rf pan-* *.trail pan pan.* _spin_nvr.tmp
