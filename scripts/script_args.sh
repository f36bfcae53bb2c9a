# Sourced by the scripts of scripts/ and bench/: their command lines' first
# checks, so that `--help` or a slip (`--nobuild`) never starts an install,
# a build or a deletion.
#
#   script_args SCRIPT [OPTION...] -- "$@"
#
# -h or --help anywhere prints the script's header comment (the lines after
# the shebang up to the first line that is not a comment) and exits 0; an
# argument that starts with `-` and is not one of the OPTIONs, or an OPTION
# after another argument (scripts read theirs first: `gpu_prepare.sh build
# dir --no-build` would build), is one line on stderr and exit 2. Other
# arguments (paths, counts) are the script's to check.
script_help() {
  sed -n '2,/^[^#]/{/^#/{s/^# \{0,1\}//;p}}' "$1"
}

script_args() {
  local script=$1 name allowed=() a o ok positional=0
  name=$(basename "$script")
  shift
  while [ $# -gt 0 ] && [ "$1" != -- ]; do allowed+=("$1"); shift; done
  [ $# -gt 0 ] && shift
  for a in "$@"; do
    case $a in
      -h | --help) script_help "$script"; exit 0 ;;
      -*)
        ok=0
        for o in "${allowed[@]+"${allowed[@]}"}"; do [ "$a" = "$o" ] && ok=1; done
        if [ $ok = 0 ]; then
          echo "$name: unknown option \`$a\` (see $name --help)" >&2
          exit 2
        fi
        if [ $positional = 1 ]; then
          echo "$name: $a comes first, before the other arguments (see $name --help)" >&2
          exit 2
        fi ;;
      *) positional=1 ;;
    esac
  done
}
