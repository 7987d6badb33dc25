#!/bin/sh
# Checks that no source file includes from a layer above its own.
#   build-aux/check-layers.sh ROOM...   the rooms, ground floor first
# A file in room R may include "x.h" (its own room) or "S/x.h" for a room S
# listed at or before R. tests/ and lab/ sit outside the building and may
# include anything. Prints one line per violation as FILE:LINE: ... and exits
# 1 when there is any (docs/design.md, "Layers").
set -u
[ $# -gt 0 ] || { echo "usage: build-aux/check-layers.sh ROOM..." >&2; exit 2; }
rooms="$*"
status=0
level=0
for room in $rooms; do
    level=$((level + 1))
    allowed=$(echo "$rooms" | tr ' ' '\n' | head -n "$level" | tr '\n' ' ')
    for file in "$room"/*.c "$room"/*.h "$room"/*.cu; do
        [ -f "$file" ] || continue
        # Quoted includes only: system headers (<...>) are outside the building.
        grep -n '^[[:space:]]*#[[:space:]]*include[[:space:]]*"' "$file" |
        while IFS= read -r hit; do
            line=${hit%%:*}
            target=$(echo "$hit" | sed 's/^[^"]*"\([^"]*\)".*/\1/')
            case "$target" in
            */*)
                target_room=${target%%/*}
                case " $allowed " in
                *" $target_room "*) ;;
                *)
                    case " $rooms " in
                    *" $target_room "*) why="room '$target_room' is above '$room'" ;;
                    *) why="'$target_room' is not a room of the build ($rooms)" ;;
                    esac
                    echo "$file:$line: includes \"$target\": $why"
                    ;;
                esac
                ;;
            *)
                [ -f "$room/$target" ] || echo "$file:$line: includes \"$target\", which is not in $room/ (name the room: \"ROOM/$target\")"
                ;;
            esac
        done
    done
done > "${TMPDIR:-/tmp}/check-layers.$$"
# The Python package: no module of lab/ or tests/ imported, no path into them.
outside=$(for file in lab/*/*.py lab/*.py tests/*.py; do [ -f "$file" ] && basename "$file" .py; done | sort -u | paste -sd'|' -)
find python -name '*.py' 2>/dev/null | while IFS= read -r file; do
    [ -n "$outside" ] && grep -nE "^[[:space:]]*(from|import)[[:space:]]+($outside)([[:space:].]|$)" "$file" |
        sed "s|^\([0-9]*\):.*|$file:\1: imports a module of lab/ or tests/ (the package stands on its own)|"
    grep -nE "[\"'](lab|tests)[\"'/]" "$file" |
        sed "s|^\([0-9]*\):.*|$file:\1: names a path in lab/ or tests/ (the package stands on its own)|"
done >> "${TMPDIR:-/tmp}/check-layers.$$"
if [ -s "${TMPDIR:-/tmp}/check-layers.$$" ]; then
    cat "${TMPDIR:-/tmp}/check-layers.$$" >&2
    echo "check-layers: a file includes from a layer above its own (order: $rooms)" >&2
    status=1
fi
rm -f "${TMPDIR:-/tmp}/check-layers.$$"
exit $status
