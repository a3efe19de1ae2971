package storage

import (
	"embed"

	"github.com/redis/rueidis"
)

//go:embed scripts/*.lua
var scriptFS embed.FS

// scripts holds every storage script, each with lib.lua prepended. The
// header of each file names its KEYS, ARGV and reply.
type scripts struct {
	current, message       *rueidis.Lua
	streamOpen, streamRead *rueidis.Lua
	streamReadSHA          string // for ReadStreams' EVALSHAs
	// The writes a caller is told are safe: run through Store.exec, which
	// waits for replicas on the same connection. A select, extend or delete
	// that a failover lost would turn a handed-out session into a 401, or
	// bring back what the user was told is gone.
	create, deliver, selectBox, extend, destroy, deleteMessage durableScript
}

func loadScripts() scripts {
	lib := mustRead("lib.lua")
	load := func(name string) *rueidis.Lua {
		return rueidis.NewLuaScript(lib + mustRead(name))
	}
	return scripts{
		create:        newDurableScript(lib + mustRead("create.lua")),
		selectBox:     newDurableScript(lib + mustRead("select.lua")),
		current:       load("current.lua"),
		extend:        newDurableScript(lib + mustRead("extend.lua")),
		destroy:       newDurableScript(lib + mustRead("destroy.lua")),
		message:       load("message.lua"),
		deleteMessage: newDurableScript(lib + mustRead("delete_message.lua")),
		deliver:       newDurableScript(lib + mustRead("deliver.lua")),
		streamOpen:    load("stream_open.lua"),
		streamRead:    load("stream_read.lua"),
		streamReadSHA: sha1Hex(lib + mustRead("stream_read.lua")),
	}
}

func mustRead(name string) string {
	b, err := scriptFS.ReadFile("scripts/" + name)
	if err != nil {
		panic("storage: missing embedded script " + name) // a build defect, not a runtime condition
	}
	return string(b)
}
