-- GET the inline VAST of real ad requests, rotating through the uuid file.
dofile((debug.getinfo(1, "S").source:match("^@(.*/)") or "./") .. "common.lua")

function init(args)
   bench_init(args)
   local count, uuid_at = load_uuids()
   for i = 1, count do
      table.insert(reqs, vast(uuid_at(i)))
   end
   prebuilt()
end
