// Package scenarios holds the Go client's scenarios of clients/SCENARIOS.md,
// each a test named by its id (TestScenario + the id in CamelCase) against
// a real stack: bin/mayfly all (make build), started as a process on free
// loopback ports against the Redis Cluster of MAYFLY_TEST_REDIS_ADDRS with a
// key prefix of its own, stopped and started again on the same ports when a
// scenario asks, and mail over real SMTP. Without Redis or bin/mayfly the
// scenarios fail; they never skip.
package scenarios
