// Package server is the node agent: it serves edgeota.v1.OTAService for the
// pods of one node, over gRPC and over REST (grpc-gateway) on a single port.
//
// Where each behaviour lives:
//   - service.go: the Server type.
//   - client.go: the agent's API client, core/v1 pods only: what it asks of
//     the API server, and NewClient, which links and starts none of
//     client-go's clientset (every API group), to keep the agent small.
//   - identity.go: who the agent is to the API server (its node or its
//     service account, settled by package apiidentity at the API server's
//     first answer), the Client that acts as it, and until then a Client
//     that answers as an unreachable API server; metrics.go: /metrics,
//     edgeota_agent_identity and the others (answer.go's).
//   - podcache.go: the node's pod cache, and when it last heard from the API
//     server; apiclock.go: that time by the API server's clock (its Date
//     header); freshness.go: that time as the ListPods header
//     x-edgeota-synced-at / X-Edgeota-Synced-At.
//   - podview.go: the view kept in the state directory (package statedir):
//     what is stored, the coalesced writes, and the stored view read at start
//     and served until the cache syncs.
//   - listpods.go, convert.go: ListPods and the v1.Pod → PodList mapping;
//     encoding.go: the last PodList's JSON and protobuf encodings, reused
//     while the cache is unchanged.
//   - upgrade.go: Upgrade and ImagePull, the live read of one pod (a list of
//     the node's pods by name, which a node's identity may make; a dry-run
//     delete that deletes nothing tells a missing pod from another node's),
//     the checks they share, the owner's request for an upgrade in place
//     written instead of the delete when the offer says so
//     (WriteUpgradeRequest), and what a delete or status patch whose answer
//     was lost did (read again by UID, or as the pod cache saw it).
//   - hold.go: Hold and ReleaseHold, the owner's "not now": the hold's end
//     computed with the API server's clock (package internal/holdtime: the
//     duration's syntax and the 30-day bound), written on the app's pod, or
//     on every DaemonSet pod of the node (a live list of them), as the
//     annotation edgeota.io/hold in a pods/status patch (package
//     podchannel), with upgrade.go's checks and lost-answer handling.
//   - answer.go: AnswerChallenges, the answer to the controller's
//     proof-of-life challenge (package podchannel): a challenge the live pod
//     cache shows unanswered on a pod of the node is echoed as the
//     annotation edgeota.io/alive-answer in one pods/status patch, acting as
//     the agent's identity; never from the stored view, never queued to
//     disk; retried with backoff while it cannot be written and the
//     challenge stands, ended by a refusal or the pod's end; counted in
//     edgeota_agent_alive_answers_total (metrics.go). The Answerer is
//     exported (NewAnswerer) so that the benchmark's simulated agents, one
//     process for many nodes, answer by this very rule and these retries.
//   - queue.go: the queue of actions asked for with queue_if_offline while
//     the API server is unreachable (upgrades, pre-pulls, holds and
//     releases), kept in the state directory, and their outcomes;
//     actions.go: queuing them, ListActions, CancelAction, and RunQueue,
//     which carries them out once the API server answers (a hold that has
//     ended by then expires instead).
//   - The owner's view, one entry per app (a DaemonSet with a pod here):
//     apps.go: grouping pods into apps by owner, following an app across the
//     replacement of its pod (or its upgrade in place: the same pod patched,
//     judged by health.JudgeInPlace; the owner's request, and its refusal),
//     and its phase (health.Judge decides FAILED, a replacement that never
//     appears included);
//     upgrades.go: the view kept current from the pod cache, ListUpgrades;
//     watch.go: WatchUpgrades' bounded fan-out (snapshot, upserts, deletes,
//     heartbeats, slow readers cut off) over gRPC and its own REST route;
//     target.go: the offered revision's images and progress deadline, the
//     hold limit and OTA upgrade deadline, read from the controller's offer
//     on the pod, and the owner's hold standing on it (package podchannel),
//     so the agent reads nothing but its node's pods. The view tells time by
//     the API server's clock (apiclock.go), as holds are written by it.
//   - validate.go: namespace and name validation of path parameters.
//   - errors.go: gRPC codes, HTTP statuses and API-server error mapping.
//   - rest.go: content negotiation, plain-text bodies and the error handler
//     that keep OpenYurt's and ACK Edge's curl scripts working.
//   - audit.go: one audit line per ImagePull, Upgrade, Hold and
//     ReleaseHold, REST or gRPC, and one per end of a queued action.
//   - recover.go: a panic answers 500 / Internal instead of killing the agent.
//   - handler.go, serve.go: one port for gRPC, REST, health (readiness:
//     which view is served and how old, and the identity in force) and
//     metrics; request limits and timeouts; graceful shutdown.
//
// The data path of a request, e.g. POST .../pods/{name}/upgrade:
// handler.go (NewHandler: one http.Handler; HTTP/2 gRPC requests go to the
// gRPC server, the rest to grpc-gateway, the watch route to watch.go) →
// package ownerauth (the caller, and the access its RPC needs) →
// validate.go (path segments) → upgrade.go (Server.Upgrade → livePod: a
// live read through client.go, a list of this node's pods by name, then the
// contract's checks in order) →
// client.go (the DELETE with UID and resourceVersion preconditions) →
// errors.go (API errors to gRPC codes) → rest.go (the code and body the
// caller negotiated). With queue_if_offline and the API server out of reach,
// upgrade.go hands the request to actions.go instead.
//
// Why one package: the transport files are thin and specific to this
// service: the REST error handler and negotiation know each response text,
// the watch route is served by hand beside the gateway. Split out, each
// would need the service's internals exported for one caller; kept here,
// every step of the path above is one file away from the next. What has a
// life of its own lives outside: ownerauth (who calls the agent and what each
// group may do: tokens, client certificates, TLS), apiidentity (who the
// agent is to the API server), statedir (atomic, versioned files),
// podcondition and podchannel (the status patch and what rides in it),
// health (readiness and the failure rule).
//
// Fuzz targets: FuzzValidatePodRef, FuzzREST (any request through the whole
// handler) and FuzzGRPCActions (any namespace and name into Upgrade,
// ImagePull, Hold and ReleaseHold, any duration and reason into Hold, over
// gRPC). Their seeds run with every go test; a longer search is
//
//	go test -run '^$' -fuzz '^FuzzREST$' -fuzztime 5m ./server
//
// and likewise for the other two (one target per run).
package server
