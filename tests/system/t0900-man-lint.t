#!/bin/bash
# t0900-man-lint: every man page is clean for mandoc (nothing above style
# level) and for groff -ww, renders no raw request (a macro glued to text,
# quotes of a .B that should be .BR), names only pages that exist among its
# own, has the sections it must have, has no unsubstituted @var@, and
# documents every option the programs' --help lists; the example config
# and the systemd unit are consistent with the pages.
TOP_SRCDIR=$(cd "$(dirname "$0")/../.." && pwd)
: "${TOP_BUILDDIR:=$(cd ../.. 2>/dev/null && pwd)}"
MAN=$TOP_BUILDDIR/man

. "$(dirname "$0")/tap-lib.sh"
not_grep () { ! grep -q "$@"; }

command -v mandoc >/dev/null 2>&1 || skip_all "mandoc not installed"
[ -f "$MAN/dtctl.1" ] || bail "$MAN/dtctl.1 not built (run make first)"

have_groff=
command -v groff >/dev/null 2>&1 && have_groff=1
[ -n "$have_groff" ] || echo "# groff not installed: skipping groff -ww and the raw-request check"
raw_re='(^|[^A-Za-z0-9])\.{1,2}(TP|TQ|B|BR|BI|RB|IR|I|IP|PP|P|SH|SS|RS|RE|EX|EE|br|sp|nf|fi)([^A-Za-z]|$)|[^ ] +,( |$)'
pages="dtctl.1 dttrain.1 libdtclient.3 dtctld.conf.5 dtctl-job.5 dtagent.8 dtctld.8"

has_section () { grep -q "^\.SH \"\?$2\"\?\$" "$MAN/$1"; }

for p in $pages; do
    f=$MAN/$p
    check "$p exists" test -s "$f"
    out=$(mandoc -T lint -W warning "$f" 2>&1)
    check "$p: mandoc -T lint reports nothing above style" test -z "$out"
    [ -n "$out" ] && echo "$out" | sed 's/^/# /'
    check "$p: no unsubstituted @var@" not_grep '@[a-zA-Z_]*@' "$f"
    req="NAME SYNOPSIS DESCRIPTION EXAMPLES SEE.ALSO"
    case $p in
        *.1|*.8) req="$req OPTIONS EXIT.STATUS FILES|ENVIRONMENT" ;;
        *.5) req="$req FILES" ;;
        *.3) req="$req RETURN.VALUES ENVIRONMENT|FILES" ;;
    esac
    for s in $req; do
        found=0
        for alt in ${s//|/ }; do has_section "$p" "${alt//./ }" && found=1; done
        check "$p: has section ${s//./ }" test $found -eq 1
    done
    # The page renders (catches macro errors that lint tolerates).
    check "$p: renders" eval 'mandoc -T utf8 "$f" >/dev/null 2>&1'
    if [ -n "$have_groff" ]; then
        out=$(groff -ww -man -Tutf8 "$f" 2>&1 >/dev/null)
        check "$p: groff -ww reports nothing" test -z "$out"
        [ -n "$out" ] && echo "$out" | sed 's/^/# /'
        # A request that reached the text: "..TP" glued to a sentence, or
        # '.B \-s ", " \-\-state' (bold quotes: ".BR" was meant).
        out=$(groff -man -Tutf8 "$f" 2>/dev/null | sed "s/.\x08//g" | grep -nE "$raw_re")
        check "$p: no raw request in the rendered page" test -z "$out"
        [ -n "$out" ] && echo "$out" | sed 's/^/# /'
    fi
    # Cross-references to this project's pages name pages that exist.
    bad=""
    for r in $(grep -o '\b\(dt\|libdt\)[a-z_.\\-]* ([0-9])' "$f" | sed 's/\\-/-/g; s/ (\([0-9]\))/.\1/' | sort -u); do
        case " $pages " in *" $r "*) ;; *) bad="$bad $r" ;; esac
    done
    check "$p: cross-references exist${bad:+ (missing:$bad)}" test -z "$bad"
done

# Every long option of a program's --help appears in its page.
opts_documented () {   # PAGE PROGRAM [ARGS]
    local page=$1; shift
    local missing="" o
    for o in $("$@" 2>&1 | grep -o -- '--[a-z][a-z0-9-]*' | sort -u); do
        # troff writes '-' as '\-'
        grep -q -- "${o//-/\\\\-}" "$MAN/$page" || missing="$missing $o"
    done
    [ -z "$missing" ] || { echo "# $page lacks:$missing"; return 1; }
}
prog () { local p; for p in "$TOP_BUILDDIR"/$1; do [ -x "$p" ] && { echo "$p"; return; }; done; }

dtctl=$(prog orchestrator/cli/dtctl)
if [ -n "$dtctl" ]; then
    check "dtctl.1 documents every global option" opts_documented dtctl.1 "$dtctl" --help
    for c in $("$dtctl" --help | awk '/^Commands:/{f=1;next} /^$/{f=0} f{print $1}'); do
        check "dtctl.1 documents 'dtctl $c' and its options" \
            eval 'grep -q "^\.B[IR]* \"\?$c\b" "$MAN/dtctl.1" && opts_documented dtctl.1 "$dtctl" $c --help'
    done
else
    echo "# dtctl not built: skipping its option check"
fi
for pp in "dttrain.1 trainer/dttrain" "dtctld.8 orchestrator/dtctld" "dtagent.8 agent/dtagent"; do
    set -- $pp
    bin=$(prog "$2")
    if [ -n "$bin" ]; then
        check "$1 documents every option of $(basename "$2") --help" opts_documented "$1" "$bin" --help
    else
        echo "# $2 not built: skipping its option check"
    fi
done

# config/: the unit points at the page, the example's keys are documented.
unit=$TOP_BUILDDIR/config/dtctld.service
example=$TOP_BUILDDIR/config/dtctld.conf.example
if [ -f "$unit" ]; then
    check "dtctld.service: Documentation=man:dtctld(8)" grep -q '^Documentation=man:dtctld(8)' "$unit"
    check "dtctld.service: no unsubstituted @var@" not_grep '@[a-zA-Z_]*@' "$unit"
else
    echo "# $unit not built: skipping"
fi
if [ -f "$example" ]; then
    missing=""
    for k in $(sed -n 's/^#\?\([A-Z][A-Za-z]*\)=.*/\1/p' "$example" | sort -u); do
        grep -q "^\.BI\? $k=" "$MAN/dtctld.conf.5" || missing="$missing $k"
    done
    check "every key of dtctld.conf.example is in dtctld.conf(5)${missing:+ (missing:$missing)}" test -z "$missing"
fi

done_testing
