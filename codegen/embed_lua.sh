#!/bin/sh
# embed_lua.sh OUT.c FILE.lua... -- embeds Lua sources into C as em_lua_stdlib[]
# ({name, src, len}, NULL-terminated) so the ember binary carries lua/stdlib.
# Uses only od and sed (coreutils), so a fresh machine needs nothing more.
out=$1; shift
{
  echo "/* @generated from lua/stdlib by codegen/embed_lua.sh -- do not edit */"
  echo "#include <stddef.h>"
  echo "typedef struct { const char *name; const char *src; size_t len; } em_lua_chunk;"
  i=0
  for f in "$@"; do
    echo "static const char chunk$i[] = {"
    od -An -v -tx1 "$f" | sed -e 's/  */ /g' -e 's/^ //' -e 's/ $//' -e '/^$/d' -e 's/\([0-9a-f][0-9a-f]\)/0x\1,/g'
    echo "0x00};"
    i=$((i + 1))
  done
  echo "__attribute__((visibility(\"default\"))) const em_lua_chunk em_lua_stdlib[] = {"
  i=0
  for f in "$@"; do
    name=$(basename "$f" .lua)
    echo "  {\"$name\", chunk$i, sizeof chunk$i - 1},"
    i=$((i + 1))
  done
  echo "  {NULL, NULL, 0}"
  echo "};"
} > "$out.tmp" && mv "$out.tmp" "$out"
