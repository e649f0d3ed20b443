-- POST an ad request; args: key, venue, screen, format (json or xml). play_time is now+60 at the start of
-- the run, which every run (bounded to seconds) stays well inside.
dofile((debug.getinfo(1, "S").source:match("^@(.*/)") or "./") .. "common.lua")

function init(args)
   bench_init(args)
   reqs = { ad_request(opt.format or "json") }
   prebuilt()
end
