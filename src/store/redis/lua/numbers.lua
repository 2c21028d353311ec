--! fragment
-- Lua turns numbers into strings with 14 significant digits; microsecond times need 16.
local function str(n)
  return string.format('%.0f', n)
end
