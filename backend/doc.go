// Package backend is the store contract: the interfaces a store
// implements (Store and the ControlStore, WaitStore, IdempotencyStore and
// ArchiveStore it may add), their Noun+Verb params, the plans and writes
// the engine resolves for a store to apply, the transition table and the
// action specs derived from it, and the capabilities a store declares.
//
// The engine resolves; a store translates. Nothing in this package decides
// a job's fate on a store's behalf: a store reads a plan and writes it as
// one transaction. Stores (backend/sqlite, backend/postgres,
// backend/redis) import this package and sluicetype, never engine; all run
// the conformance suite in backend/backendtest.
//
// Stability: this package is for store authors. It follows the engine's
// releases, and may change in a minor release when the engine needs a new
// write from its stores; such changes are listed in CHANGELOG.md under the
// store contract. Programs that only run Sluice do not import it.
//
// # Layout of a store
//
// Every store (backend/sqlite, backend/postgres, backend/redis) has the
// same files, one per section of the contract, so that a behaviour fixed
// in every store starts with the same file in each (layout_test.go holds
// it, and lists the few files only some stores have):
//
//	store.go         Open, Close, Backend, Capabilities, Now, DurabilityWarnings
//	insert.go        JobInsertMany
//	get.go           JobGetByID, JobEventList
//	claim.go         JobClaim
//	finish.go        JobCompleteMany, JobFinish
//	workflow.go      JobCheckpoint, and the workflow writes of a finish or claim
//	leases.go        JobLeaseRenew, JobListExpiredLeases
//	schedule.go      JobScheduleDue
//	retention.go     JobDeleteExpired
//	fingerprints.go  FingerprintGet, FingerprintList, FingerprintRelease
//	workers.go       WorkerHeartbeat, WorkerDelete
//	leader.go        LeaderAttempt, LeaderResign
//	list.go          JobListPage, JobCountMatching, JobCountUniqueHeld (ControlStore)
//	counts.go        JobCountByQueue, JobCountReconcile, the maintained counters
//	errgroups.go     JobErrorGroups, ErrorGroupTriage* (operators' verdicts)
//	actions.go       JobAction, JobUpdatePayload, JobRetryCopy
//	fork.go          JobFork
//	operations.go    Operation* (bulk operations) but those of canary.go
//	canary.go        OperationCanarySet, OperationResume (a canary run's stage)
//	queues.go        QueueList, QueuePause, QueueResume
//	wait.go          SignalSend, SignalList, SignalConsume, JobWake (WaitStore)
//	idempotency.go   Idempotency* (IdempotencyStore)
//	archive.go       ArchiveList, ArchiveGet (ArchiveStore; PostgreSQL only)
//	limits.go        LimitList, LimitSet (LimitStore), and claims under limits
//	periodic.go      Schedule* (ScheduleStore: periodic jobs' schedules)
//	audit.go         Audit* (AuditStore: the audit trail), and the append
//	                 every write whose context carries a record makes
//	filter.go        a Filter translated to the store's query (or, on Redis, matched)
//	errpatterns.go   regrouping stored error patterns after a normalisation change
//	migrate.go       schema migrations; status.go: the schema's state, read only
package backend
