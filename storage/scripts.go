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
	selectBox, current, extend, destroy *rueidis.Lua
	message, deleteMessage              *rueidis.Lua
	streamOpen, streamRead              *rueidis.Lua
	// The writes a caller is told are safe: run through Store.exec, which
	// waits for replicas on the same connection.
	create, deliver durableScript
}

func loadScripts() scripts {
	lib := mustRead("lib.lua")
	load := func(name string) *rueidis.Lua {
		return rueidis.NewLuaScript(lib + mustRead(name))
	}
	return scripts{
		create:        newDurableScript(lib + mustRead("create.lua")),
		selectBox:     load("select.lua"),
		current:       load("current.lua"),
		extend:        load("extend.lua"),
		destroy:       load("destroy.lua"),
		message:       load("message.lua"),
		deleteMessage: load("delete_message.lua"),
		deliver:       newDurableScript(lib + mustRead("deliver.lua")),
		streamOpen:    load("stream_open.lua"),
		streamRead:    load("stream_read.lua"),
	}
}

func mustRead(name string) string {
	b, err := scriptFS.ReadFile("scripts/" + name)
	if err != nil {
		panic("storage: missing embedded script " + name) // a build defect, not a runtime condition
	}
	return string(b)
}
