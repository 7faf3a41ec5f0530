# semvisor: System V semaphores served by a seccomp user-notification supervisor.
#
#   make              build everything into $(O) (default build/)
#   make run          install missing packages, build, run the demo under semvisor-run
#   make test         build and run the whole test suite
#   make layers       draw which file of server/ calls which; fail on a circle
#   make test-asan    the suite under AddressSanitizer + UndefinedBehaviorSanitizer
#   make test-tsan    the lock and engine stress tests under ThreadSanitizer
#   make test-debug   the suite built with DEBUG=1 (into $(O)/debug): locking rules asserted,
#                     random yields on the lock and engine paths
#   make stress       loop the lock, engine and semvisor-run stress tests, release and debug
#                     builds, until one fails or STRESS_SECONDS (default 300) pass
#   make verify       model-check the Promela models with spin: the lock, the fast path's protocol
#   make fuzz         run every libFuzzer target for FUZZ_SECONDS (default 30)
#   make bench        the benchmark suite (bench/results/latest.md)
#   make deps         apt-get install the Debian packages the project needs
#   make install      the programs, manual pages and systemd files (PREFIX, DESTDIR);
#                     make uninstall takes them away again (not /etc/semvisor)
#   make lint|format  clang-format check / rewrite
#
# Variables: SAN=asan|tsan (sanitizer build into build/asan or build/tsan; SAN=fuzz, with
# CC=clang, the library the fuzz targets link, into build/fuzz/lib),
# DEBUG=1 (the debug build, into build/debug or build/SAN/debug: -DSV_DEBUG -DAMUTEX_DEBUG turn
# on every "caller holds X" / "under RCU" assertion and the random yields of util/debug.h and
# amutex.c; release builds compile both out),
# LOCK=pthread (engine locks on pthread_mutex instead of the adaptive mutex),
# LOCKING=global (every semop takes the whole set: the contrast for bench/),
# COUNTERS=off (no statistics counted: what counting costs, for bench/),
# WERROR=1 (warnings are errors; CI sets it), PREFIX/DESTDIR for install.

CC      ?= gcc
PREFIX  ?= /usr/local
DESTDIR ?=
SAN     ?=
DEBUG   ?= 0
LOCK    ?= amutex
WERROR  ?= 0

ifeq ($(SAN),asan)
O_BASE   = build/asan
SANFLAGS = -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined
else ifeq ($(SAN),tsan)
O_BASE   = build/tsan
SANFLAGS = -fsanitize=thread -fno-omit-frame-pointer
else ifeq ($(SAN),fuzz)
# The library the libFuzzer targets link (tests/fuzz/run.sh builds it with CC=clang): every
# server source, instrumented for coverage, ASan and UBSan, so a target names none of them.
# -fno-sanitize=pointer-overflow: liburcu's iteration macros (cds_lfht_for_each_entry) end
# every walk by taking caa_container_of() of a NULL node, which clang reports though the
# pointer is never used.
O_BASE   = build/fuzz/lib
SANFLAGS = -fsanitize=fuzzer-no-link,address,undefined -fno-sanitize-recover=undefined \
           -fno-sanitize=pointer-overflow -fno-omit-frame-pointer
else
O_BASE   = build
SANFLAGS =
endif
# The debug build changes struct amutex's size: it never shares a directory with another build.
ifeq ($(DEBUG),1)
O       ?= $(O_BASE)/debug
else
O       ?= $(O_BASE)
endif

WARN = -Wall -Wextra -Wshadow -Wmissing-prototypes -Wstrict-prototypes -Wformat=2 \
       -Wnull-dereference -Wpointer-arith -Wcast-align -Wwrite-strings -Wundef \
       -Wno-missing-field-initializers
# clang warns on every container-of cast (liburcu's list and hash table macros), which is the
# library's idiom and harmless on x86; gcc's -Wcast-align does not.
ifneq ($(findstring clang,$(shell $(CC) --version 2>/dev/null)),)
WARN += -Wno-cast-align
endif
ifeq ($(WERROR),1)
WARN += -Werror
endif

CPPFLAGS += -D_GNU_SOURCE -I. -Iserver -I$(O)/proto
ifeq ($(LOCK),pthread)
CPPFLAGS += -DSV_LOCK_PTHREAD
endif
ifeq ($(LOCKING),global)
CPPFLAGS += -DSV_FORCE_GLOBAL_LOCK
endif
ifeq ($(COUNTERS),off)
CPPFLAGS += -DSV_NO_COUNTERS
endif
ifeq ($(DEBUG),1)
CPPFLAGS += -DSV_DEBUG -DAMUTEX_DEBUG
endif
CFLAGS  ?= -O2 -g
CFLAGS  += -std=gnu11 -pthread $(WARN) $(SANFLAGS)
LDFLAGS += -pthread $(SANFLAGS)

LIBS_ENGINE = -lurcu-memb -lurcu-cds -lurcu-common
LIBS_NOTIFY = -lseccomp -lev
LIBS_PROTO  = -lprotobuf-c
LIBS_JSON   = -ljansson
LIBS        = $(LIBS_NOTIFY) $(LIBS_PROTO) $(LIBS_JSON) $(LIBS_ENGINE)

# ---- sources -------------------------------------------------------------------------------
PROTO_SRC   = $(wildcard proto/*.proto)
PROTO_C     = $(patsubst proto/%.proto,$(O)/proto/%.pb-c.c,$(PROTO_SRC))
PROTO_H     = $(PROTO_C:.c=.h)

LIB_SRC     = $(wildcard server/engine/*.c server/lock/*.c server/notify/*.c server/handoff/*.c \
                         server/control/*.c server/util/*.c)
LIB_OBJ     = $(patsubst %.c,$(O)/%.o,$(LIB_SRC)) $(PROTO_C:.c=.o)
LIB         = $(O)/libsemvisor.a

RUN_SRC     = $(wildcard interposer/*.c)
DAEMON_SRC  = $(wildcard server/daemon/*.c)
LXC_SRC     = client/semvisor-lxc.c
KEEPER_SRC  = client/semvisor-keeper.c
CTL_SRC     = $(filter-out $(LXC_SRC) $(KEEPER_SRC),$(wildcard client/*.c))

BIN_RUN     = $(if $(RUN_SRC),$(O)/semvisor-run)
BIN_DAEMON  = $(if $(DAEMON_SRC),$(O)/semvisord)
BIN_CTL     = $(if $(CTL_SRC),$(O)/semvisorctl)
# semvisor-lxc only where liblxc's headers are (Debian's lxc-dev): the rest builds without it.
HAVE_LXC   := $(shell pkg-config --exists lxc 2>/dev/null && echo 1)
BIN_LXC     = $(if $(and $(HAVE_LXC),$(wildcard $(LXC_SRC))),$(O)/semvisor-lxc)
BIN_KEEPER  = $(if $(wildcard $(KEEPER_SRC)),$(O)/semvisor-keeper)
# The fast path's preloaded library (semvisor-run --fast), beside semvisor-run.
FASTLIB_SRC = $(wildcard interposer/preload/*.c)
BIN_FASTLIB = $(if $(FASTLIB_SRC),$(O)/libsemvisor-fast.so)
BINS        = $(BIN_RUN) $(BIN_DAEMON) $(BIN_CTL) $(BIN_LXC) $(BIN_KEEPER) $(BIN_FASTLIB)

TEST_SRC    = $(wildcard tests/[0-9][0-9]-*.c)
TEST_BIN    = $(patsubst tests/%.c,$(O)/tests/%,$(TEST_SRC))
TPROG_SRC   = $(wildcard tests/prog/*.c)
TPROG_BIN   = $(patsubst tests/prog/%.c,$(O)/tests/prog/%,$(TPROG_SRC))
TLIB_SRC    = $(wildcard tests/lib/*.c)
TLIB_OBJ    = $(patsubst %.c,$(O)/%.o,$(TLIB_SRC))
BENCH_SRC   = $(wildcard bench/*.c)
BENCH_BIN   = $(patsubst bench/%.c,$(O)/bench/%,$(BENCH_SRC))
DEMO_SRC    = $(wildcard demo/*.c)
DEMO_BIN    = $(patsubst demo/%.c,$(O)/demo/%,$(DEMO_SRC))

ALL_OBJ     = $(LIB_OBJ) $(TLIB_OBJ) \
              $(patsubst %.c,$(O)/%.o,$(RUN_SRC) $(DAEMON_SRC) $(CTL_SRC) \
                                      $(if $(BIN_LXC),$(LXC_SRC)) $(KEEPER_SRC))

.SECONDARY:

.PHONY: all run demo test check layers test-asan test-tsan test-debug stress verify fuzz \
        bench bench-quick deps install uninstall lint format clean tests benches print-libs

all: $(BINS) tests benches $(DEMO_BIN)
tests: $(TEST_BIN) $(TPROG_BIN)
benches: $(BENCH_BIN)

# ---- compile -------------------------------------------------------------------------------
$(O)/proto/%.pb-c.c $(O)/proto/%.pb-c.h: proto/%.proto
	@mkdir -p $(@D)
	protoc-c --proto_path=proto --c_out=$(O)/proto $<

$(O)/proto/%.pb-c.o: $(O)/proto/%.pb-c.c
	$(CC) $(CPPFLAGS) $(CFLAGS) -Wno-cast-align -c -o $@ $<

$(O)/%.o: %.c $(PROTO_H)
	@mkdir -p $(@D)
	$(CC) $(CPPFLAGS) $(CFLAGS) -MMD -MP -c -o $@ $<

$(LIB): $(LIB_OBJ)
	@rm -f $@
	$(AR) rcs $@ $^

$(O)/semvisor-run: $(patsubst %.c,$(O)/%.o,$(RUN_SRC)) $(LIB)
	$(CC) $(LDFLAGS) -o $@ $^ $(LIBS)
$(O)/semvisord: $(patsubst %.c,$(O)/%.o,$(DAEMON_SRC)) $(LIB)
	$(CC) $(LDFLAGS) -o $@ $^ $(LIBS) -lsystemd
# semvisorctl shares only the protocol's framing and the metrics' text with the server: it links
# those files and the generated messages, not the server library and its libraries; --json adds
# jansson.
CTL_LIB_OBJ = $(O)/server/control/ctl_frame.o $(O)/server/control/ctl_metrics.o \
              $(O)/server/util/utf8.o $(PROTO_C:.c=.o)
$(O)/semvisorctl: $(patsubst %.c,$(O)/%.o,$(CTL_SRC)) $(CTL_LIB_OBJ)
	$(CC) $(LDFLAGS) -o $@ $^ $(LIBS_PROTO) $(LIBS_JSON)

# semvisor-lxc shares the agent message and its transfer (handoff/msg.c, meta.c, xfer.c) with
# the daemon, the way runc's side of it is written once for semvisor-run too.
LXC_LIB_OBJ = $(O)/server/handoff/msg.o $(O)/server/handoff/meta.o $(O)/server/handoff/xfer.o
$(O)/client/semvisor-lxc.o: CPPFLAGS += $(shell pkg-config --cflags lxc 2>/dev/null)
$(O)/semvisor-lxc: $(O)/client/semvisor-lxc.o $(LXC_LIB_OBJ)
	$(CC) $(LDFLAGS) -o $@ $^ $(LIBS_JSON) $(shell pkg-config --libs lxc 2>/dev/null)

# The preloaded library goes into programs of every kind: no sanitizer (its runtime must come
# first in a program, which a preloaded library cannot be) and nothing but libc.
$(O)/libsemvisor-fast.so: $(FASTLIB_SRC) server/engine/fastword.h server/engine/sem.h \
                          server/notify/fastabi.h
	@mkdir -p $(@D)
	$(CC) $(CPPFLAGS) -O2 -g -std=gnu11 $(WARN) -fPIC -shared -fvisibility=hidden \
	      -o $@ $(FASTLIB_SRC)

# semvisor-keeper stands alone: a service manager for one service needs nothing of the server.
$(O)/semvisor-keeper: $(O)/client/semvisor-keeper.o
	$(CC) $(LDFLAGS) -o $@ $^

$(O)/tests/%: $(O)/tests/%.o $(TLIB_OBJ) $(LIB)
	$(CC) $(LDFLAGS) -o $@ $^ $(LIBS) -lcriterion

# Fault-injection tests (tests/NN-*-faults.c) link the library built again with
# SV_FAULT_INJECT (server/util/fault.h), whose resource calls fail on demand.
FAULT_OBJ   = $(patsubst %.c,$(O)/faults/%.o,$(LIB_SRC))
FAULT_LIB   = $(O)/libsemvisor-faults.a
$(O)/faults/%.o: %.c $(PROTO_H)
	@mkdir -p $(@D)
	$(CC) $(CPPFLAGS) -DSV_FAULT_INJECT $(CFLAGS) -MMD -MP -c -o $@ $<
$(FAULT_LIB): $(FAULT_OBJ) $(PROTO_C:.c=.o)
	@rm -f $@
	$(AR) rcs $@ $^
$(O)/tests/%-faults.o: CPPFLAGS += -DSV_FAULT_INJECT
$(O)/tests/%-faults: $(O)/tests/%-faults.o $(TLIB_OBJ) $(FAULT_LIB)
	$(CC) $(LDFLAGS) -o $@ $^ $(LIBS) -lcriterion

# Test programs run both natively and confined: plain executables, no project code inside.
# static-* (what musl and static binaries do: the raw semop call) and ct-* (run inside a
# container's bare rootfs) are linked statically, so without sanitizers.
TPROG_HDR = $(wildcard tests/prog/*.h)
$(O)/tests/prog/static-% $(O)/tests/prog/ct-%: STATIC_CFLAGS = $(filter-out -fsanitize=%,$(CFLAGS))
$(O)/tests/prog/static-%: tests/prog/static-%.c $(TPROG_HDR) $(wildcard tests/prog/syscalls.c)
	@mkdir -p $(@D)
	$(CC) $(CPPFLAGS) $(STATIC_CFLAGS) -static -o $@ $< -pthread
$(O)/tests/prog/ct-%: tests/prog/ct-%.c $(TPROG_HDR)
	@mkdir -p $(@D)
	$(CC) $(CPPFLAGS) $(STATIC_CFLAGS) -static -o $@ $< -pthread
$(O)/tests/prog/%: tests/prog/%.c $(TPROG_HDR)
	@mkdir -p $(@D)
	$(CC) $(CPPFLAGS) $(CFLAGS) -o $@ $< $(LDFLAGS)

$(O)/bench/%: $(O)/bench/%.o $(LIB)
	$(CC) $(LDFLAGS) -o $@ $^ $(LIBS) -lm

$(O)/demo/%: $(O)/demo/%.o $(LIB)
	$(CC) $(LDFLAGS) -o $@ $^ $(LIBS)

-include $(ALL_OBJ:.o=.d) $(FAULT_OBJ:.o=.d) \
	 $(patsubst %.c,$(O)/%.d,$(TEST_SRC) $(BENCH_SRC) $(DEMO_SRC))

# ---- run, test, verify ---------------------------------------------------------------------
DEPS_PKGS = build-essential pkg-config libseccomp-dev libev-dev liburcu-dev libprotobuf-c-dev \
            libjansson-dev protobuf-c-compiler libcriterion-dev libsystemd-dev clang libclang-rt-14-dev \
            spin gnuplot-nox runc busybox-static systemd iproute2 util-linux python3-yaml \
            prometheus lxc lxc-dev podman containerd crun

deps:
	@missing=$$(for p in $(DEPS_PKGS); do \
		dpkg-query -W -f='$${Status}' $$p 2>/dev/null | grep -q 'ok installed' || echo $$p; done); \
	if [ -n "$$missing" ]; then \
		echo "installing:" $$missing; \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing; \
	fi

run: deps
	$(MAKE) all
	./demo/run.sh $(O)

# Every test binary runs; the run fails if any of them fails.
test check: deps
	$(MAKE) tests $(BINS)
	O=$(O) ./tests/layers.sh >$(O)/layers.txt || { cat $(O)/layers.txt; exit 1; }
	O=$(O) ./tests/install.sh
	O=$(O) ./tests/run.sh $(TEST_BIN)

# Which file of server/ calls which, and no circle inside a layered folder (tests/layers.sh).
layers: $(LIB)
	O=$(O) ./tests/layers.sh

test-asan:
	$(MAKE) SAN=asan test

# Only the concurrency tests are worth TSan's cost: the lock, the engine's stress tests, the
# notify layer's workers.
TSAN_SRC   = $(filter-out %-rules.c,$(wildcard tests/1?-lock-*.c tests/2?-engine-stress*.c \
                                                tests/31-notify-receiver.c))
TSAN_TESTS = $(patsubst tests/%.c,$(O)/tests/%,$(TSAN_SRC))
test-tsan:
	$(MAKE) SAN=tsan tests-tsan-run

tests-tsan-run: $(TSAN_TESTS)
	O=$(O) ./tests/run.sh $(TSAN_TESTS)

# The debug build of the whole suite, beside the build it is asked from ($(O)/debug).
test-debug:
ifeq ($(DEBUG),1)
	$(MAKE) test
else
	$(MAKE) DEBUG=1 O=$(O)/debug test
endif

# What tests/stress.sh loops: the lock's tests, the engine's stress tests and the stress test of
# semvisor-run (with what it runs), in this build and, unless this is one, in its debug build.
STRESS_SRC  = $(filter-out %-rules.c,$(wildcard tests/1?-lock-*.c tests/2?-engine-stress*.c \
                                                 tests/42-run-stress.c))
STRESS_NEED = $(patsubst tests/%.c,tests/%,$(STRESS_SRC)) $(if $(RUN_SRC),semvisor-run) \
              $(patsubst $(O)/%,%,$(TPROG_BIN))
STRESS_DIRS = $(O) $(if $(filter 1,$(DEBUG)),,$(O)/debug)
stress:
	$(MAKE) $(addprefix $(O)/,$(STRESS_NEED))
ifneq ($(DEBUG),1)
	$(MAKE) DEBUG=1 O=$(O)/debug $(addprefix $(O)/debug/,$(STRESS_NEED))
endif
	./tests/stress.sh $(STRESS_DIRS)

verify:
	$(MAKE) -C server/lock/model verify
	$(MAKE) -C server/engine/model verify

fuzz:
	O=$(O) tests/fuzz/run.sh $(or $(FUZZ_SECONDS),30)

# What a program linking libsemvisor.a needs after it (tests/fuzz/run.sh links its targets so).
print-libs:
	@echo $(LIBS)

bench: all
	./bench/run.sh $(O) full
bench-quick: all
	./bench/run.sh $(O) quick

# ---- install, lint -------------------------------------------------------------------------
# The programs (semvisor-lxc where liblxc is), their pages and the systemd files: tests and
# benchmarks are not built.
MAN1 = $(filter-out $(if $(BIN_LXC),,client/semvisor-lxc.1),$(wildcard interposer/*.1 client/*.1))
install: $(BINS)
	install -d $(DESTDIR)$(PREFIX)/bin $(DESTDIR)$(PREFIX)/sbin
	$(if $(BIN_RUN),install -m 0755 $(BIN_RUN) $(DESTDIR)$(PREFIX)/bin/)
	$(if $(BIN_CTL),install -m 0755 $(BIN_CTL) $(DESTDIR)$(PREFIX)/bin/)
	$(if $(BIN_LXC),install -m 0755 $(BIN_LXC) $(DESTDIR)$(PREFIX)/bin/)
	$(if $(BIN_DAEMON),install -m 0755 $(BIN_DAEMON) $(DESTDIR)$(PREFIX)/sbin/)
	$(if $(BIN_KEEPER),install -m 0755 $(BIN_KEEPER) $(DESTDIR)$(PREFIX)/sbin/)
	$(if $(BIN_FASTLIB),install -d $(DESTDIR)$(PREFIX)/lib/semvisor)
	$(if $(BIN_FASTLIB),install -m 0644 $(BIN_FASTLIB) $(DESTDIR)$(PREFIX)/lib/semvisor/)
	install -d $(DESTDIR)$(PREFIX)/share/man/man1 $(DESTDIR)$(PREFIX)/share/man/man5 \
	           $(DESTDIR)$(PREFIX)/share/man/man8
	$(foreach m,$(MAN1),install -m 0644 $(m) $(DESTDIR)$(PREFIX)/share/man/man1/;)
	$(foreach m,$(wildcard server/daemon/*.5),install -m 0644 $(m) $(DESTDIR)$(PREFIX)/share/man/man5/;)
	$(foreach m,$(wildcard server/daemon/*.8 client/*.8),install -m 0644 $(m) $(DESTDIR)$(PREFIX)/share/man/man8/;)
	$(if $(wildcard systemd/install.sh),PREFIX=$(PREFIX) DESTDIR=$(DESTDIR) ./systemd/install.sh)

# Everything install put there, but /etc/semvisor/semvisord.conf: the administrator's.
uninstall:
	rm -f $(DESTDIR)$(PREFIX)/bin/semvisor-run $(DESTDIR)$(PREFIX)/bin/semvisorctl \
	      $(DESTDIR)$(PREFIX)/bin/semvisor-lxc \
	      $(DESTDIR)$(PREFIX)/sbin/semvisord $(DESTDIR)$(PREFIX)/sbin/semvisor-keeper \
	      $(DESTDIR)$(PREFIX)/lib/semvisor/libsemvisor-fast.so
	$(foreach m,$(wildcard interposer/*.1 client/*.1),rm -f $(DESTDIR)$(PREFIX)/share/man/man1/$(notdir $(m));)
	$(foreach m,$(wildcard server/daemon/*.5),rm -f $(DESTDIR)$(PREFIX)/share/man/man5/$(notdir $(m));)
	$(foreach m,$(wildcard server/daemon/*.8 client/*.8),rm -f $(DESTDIR)$(PREFIX)/share/man/man8/$(notdir $(m));)
	$(if $(wildcard systemd/install.sh),PREFIX=$(PREFIX) DESTDIR=$(DESTDIR) ./systemd/install.sh --uninstall)

FORMAT_SRC = $(shell git ls-files '*.c' '*.h' 2>/dev/null)
lint:
	clang-format --dry-run --Werror $(FORMAT_SRC)
format:
	clang-format -i $(FORMAT_SRC)

clean:
	rm -rf build
