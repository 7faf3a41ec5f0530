#!/bin/sh
# Which file calls which, inside each folder of server/: drawn from the symbols each object
# defines and uses, so it cannot drift from the code. Fails if, in a layered folder, files
# call each other in a circle (directly or through others): such a folder reads from the
# bottom up. The engine is one unit in several files (sets, namespaces and undo lists refer
# to each other as the kernel's ipc/ files do), and the daemon's files serve its main loop.
# Usage: O=build tests/layers.sh
set -eu
O=${O:-build}
LAYERED=${LAYERED:-"control handoff lock notify util"}
status=0
for dir in "$O"/server/*/; do
	set -- "$dir"*.o
	[ -e "$1" ] || continue
	edges=$(nm -o "$@" | awk '
		{ split($1, p, ":"); f = p[1]; sub(/.*\//, "", f); sub(/\.o$/, "", f) }
		NF == 3 && $2 ~ /^[TDRB]$/ { def[$3] = f }
		$(NF - 1) == "U" { use[f, $NF] = 1; files[f] = 1 }
		NF == 3 && $2 ~ /^[TDRB]$/ { files[f] = 1 }
		END {
			for (k in use) {
				split(k, a, SUBSEP)
				if ((a[2] in def) && def[a[2]] != a[1])
					print a[1], def[a[2]]
			}
			for (f in files)
				print f, f
		}' | sort -u)
	echo "${dir#"$O"/}"
	echo "$edges" | awk '$1 != $2 { to[$1] = to[$1] " " $2 } $1 == $2 { all[$1] = 1 }
		END { for (f in all) printf "  %-12s ->%s\n", f, to[f] }' | sort
	folder=$(basename "$dir")
	case " $LAYERED " in *" $folder "*) ;; *) continue ;; esac
	if ! echo "$edges" | tsort >/dev/null 2>"$O/layers.err"; then
		echo "  a circle:" >&2
		sed 's/^/    /' "$O/layers.err" >&2
		status=1
	fi
done
exit $status
