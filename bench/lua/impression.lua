-- Fire the impression pixel on real ad requests, in the order of the uuid file, starting at `offset`: each
-- uuid once (a first fire) until the list runs out; after that the list repeats, and those are duplicates.
dofile((debug.getinfo(1, "S").source:match("^@(.*/)") or "./") .. "common.lua")

function init(args)
   bench_init(args)
   local count, uuid_at = load_uuids()
   local before, after = halves(impression)
   size = count
   function build(i)
      return before .. uuid_at(i) .. after
   end
end
