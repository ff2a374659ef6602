#!/usr/bin/env bash
# debian/changelog for one version, written from CHANGELOG.md's entry for it, so the version
# and its notes are written once (VERSION, CHANGELOG.md). Used by scripts/deb.sh.
#
#   scripts/deb-changelog.sh VERSION CHANGELOG.md debian/control > debian/changelog
#
# The entry is the section "## VERSION — YYYY-MM-DD" up to the next "## ": its "### Kind"
# headings become "* Kind:", its "- " items "- " lines under them, other paragraphs "* "
# items, all wrapped to 78 columns. The trailer's date is the heading's (the last date on
# it, at midnight UTC): a rebuild gives the same changelog, and dpkg's SOURCE_DATE_EPOCH,
# taken from it, the same packages. The maintainer is debian/control's.
set -euo pipefail

[ $# -eq 3 ] || { echo "usage: $0 VERSION CHANGELOG.md debian/control" >&2; exit 2; }
version=$1 notes=$2 control=$3

maintainer=$(sed -n 's/^Maintainer: //p' "$control")
[ -n "$maintainer" ] || { echo "deb-changelog: no Maintainer in $control" >&2; exit 1; }

body=$(awk -v v="$version" '
  function flush(   n, i, w, line, width) {
    if (text == "") return
    n = split(text, w, " ")
    line = first; width = 78
    for (i = 1; i <= n; i++) {
      if (line != first && length(line) + 1 + length(w[i]) > width) { print line; line = rest }
      line = (line == first || line == rest) ? line w[i] : line " " w[i]
    }
    print line
    text = ""
  }
  function start(f, r, t) { flush(); first = f; rest = r; text = t }
  index($0, "## ") == 1 && !/^### / {
    if (inside) exit
    if ($0 == "## " v || index($0, "## " v " ") == 1) {
      inside = 1
      date = $0
      while (match(date, /[0-9][0-9][0-9][0-9]-[0-9][0-9]-[0-9][0-9]/)) {
        found = substr(date, RSTART, RLENGTH); date = substr(date, RSTART + RLENGTH)
      }
    }
    next
  }
  !inside { next }
  /^### / { flush(); print "  * " substr($0, 5) ":"; nested = 1; next }
  /^- / { start(nested ? "    - " : "  * ", nested ? "      " : "    ", substr($0, 3)); next }
  /^[ \t]*$/ { flush(); next }
  /^  / && text != "" { sub(/^ +/, ""); text = text " " $0; next }
  { if (text == "") start("  * ", "    ", $0); else text = text " " $0 }
  END {
    if (!inside) { print "no \"## " v "\" entry" > "/dev/stderr"; exit 1 }
    flush()
    if (found == "") { print "the \"## " v "\" heading has no YYYY-MM-DD date" > "/dev/stderr"; exit 1 }
    print "@DATE@ " found
  }
' "$notes") || { echo "deb-changelog: $notes: cannot take the entry for $version" >&2; exit 1; }

day=${body##*@DATE@ }
body=${body%@DATE@ *}
body=${body%$'\n'}
[ -n "$body" ] || { echo "deb-changelog: the entry for $version in $notes is empty" >&2; exit 1; }
stamp=$(LC_ALL=C date -u -R -d "$day 00:00:00") || { echo "deb-changelog: not a date: $day" >&2; exit 1; }

printf 'ckcd-coex (%s) unstable; urgency=medium\n\n%s\n\n -- %s  %s\n' "$version" "$body" "$maintainer" "$stamp"
