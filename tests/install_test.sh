#!/bin/sh
# install_test.sh -- make install into a temporary DESTDIR, then as a user
# of the installed files: build examples/embed/embed.c with
# `pkg-config --cflags --libs ember` and run it, `require "ember"` from
# stock lua5.4, man pages in place; then make uninstall leaves no file.
# Prints "install: N passed, N failed". Called by run_tests.sh.
B=${BUILD:-build}
MAKE=${MAKE:-make}
D=$(mktemp -d)
trap 'rm -rf "$D"' EXIT
P=/usr/local
pass=0 fail=0
ok() { pass=$((pass + 1)); echo "ok   $1"; }
bad() { fail=$((fail + 1)); echo "FAIL $1"; [ -n "$2" ] && echo "$2" | sed 's/^/     /'; }

if out=$($MAKE -s install BUILD="$B" DESTDIR="$D" PREFIX=$P 2>&1); then ok "make install DESTDIR"; else bad "make install DESTDIR" "$out"; fi
for f in bin/ember lib/libember.a lib/libember.so lib/libember.so.0 include/ember.h include/ember/em_ops.h \
         include/ember/core/em_core.h lib/pkgconfig/ember.pc lib/lua/5.4/ember.so \
         share/man/man1/ember.1 share/man/man7/ember-ops.7 share/man/man7/ember-lua.7; do
  [ -e "$D$P/$f" ] || bad "installed $f"
done
soname=$(objdump -p "$D$P/lib/libember.so" 2>/dev/null | awk '$1 == "SONAME" { print $2 }')
[ "$soname" = "libember.so.0" ] && ok "SONAME libember.so.0" || bad "SONAME" "got '$soname'"

export PKG_CONFIG_PATH="$D$P/lib/pkgconfig" PKG_CONFIG_SYSROOT_DIR="$D"
if out=$(${CC:-cc} -o "$D/embed" examples/embed/embed.c $(pkg-config --cflags --libs ember) 2>&1); then
  ok "examples/embed builds with pkg-config"
  out=$(LD_LIBRARY_PATH="$D$P/lib" "$D/embed" 2>&1)
  case "$out" in
    "weights 1.0"*|"weights 0.9"*) ok "examples/embed trains: $out" ;;
    *) bad "examples/embed runs" "$out" ;;
  esac
else
  bad "examples/embed builds with pkg-config" "$out"
fi
out=$(LD_LIBRARY_PATH="$D$P/lib" LUA_CPATH="$D$P/lib/lua/5.4/?.so" lua5.4 -e 'print(require "ember".ones(2))' 2>&1)
[ "$out" = "tensor([1., 1.])" ] && ok "lua5.4 require \"ember\" from the install" || bad "lua5.4 require" "$out"
out=$(LD_LIBRARY_PATH="$D$P/lib" "$D$P/bin/ember" -e 'print(ember.arange(3):sum())' 2>&1)
[ "$out" = "tensor(3)" ] && ok "installed ember runs" || bad "installed ember runs" "$out"
MANPATH="$D$P/share/man" man -w ember-ops >/dev/null 2>&1 || [ -s "$D$P/share/man/man7/ember-ops.7" ] \
  && ok "man pages" || bad "man pages"
# the installed ember-lua(7) renders without a groff warning and opens with man -l
if command -v groff >/dev/null; then
  out=$(groff -ww -man -Tutf8 "$D$P/share/man/man7/ember-lua.7" 2>&1 >/dev/null)
  [ -z "$out" ] && ok "ember-lua(7) renders with groff -ww" || bad "ember-lua(7) groff warnings" "$out"
  if command -v man >/dev/null; then
    out=$(MANPAGER=cat MANWIDTH=80 man -l "$D$P/share/man/man7/ember-lua.7" 2>&1)
    case "$out" in *"EMBER-LUA(7)"*) ok "man -l ember-lua.7" ;; *) bad "man -l ember-lua.7" "$out" ;; esac
  fi
else
  echo "skip ember-lua(7) rendering: groff is not installed"
fi

if out=$($MAKE -s uninstall BUILD="$B" DESTDIR="$D" PREFIX=$P 2>&1); then ok "make uninstall"; else bad "make uninstall" "$out"; fi
left=$(find "$D$P" -type f -o -type l 2>/dev/null)
[ -z "$left" ] && ok "uninstall removes every installed file" || bad "uninstall left files" "$left"
echo "install: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
