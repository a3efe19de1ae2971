package storage

// SetDeliverScript replaces the delivery script of s with body (lib.lua
// prepended), so a test can make a real Redis answer what the real script
// never does.
func SetDeliverScript(s *Store, body string) {
	s.scripts.deliver = newDurableScript(mustRead("lib.lua") + body)
}
