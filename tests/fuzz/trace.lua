-- trace.lua FILE -- runs one fuzz input through driver.lua with the plain
-- build (EMBER_FUZZ_TRACE=1 prints each call): `EMBER_FUZZ_TRACE=1
-- build/ember tests/fuzz/trace.lua build/fuzz/crashes/lua-crash-...`
local f = assert(io.open(arg[1], "rb"))
local data = f:read("a")
f:close()
dofile("tests/fuzz/driver.lua")(data)
