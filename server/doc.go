// Package server is the node agent: it serves edgeota.v1.OTAService for the
// pods of one node, over gRPC and over REST (grpc-gateway) on a single port.
//
// Where each behaviour lives:
//   - service.go: the Server type and the cache it reads.
//   - listpods.go, convert.go: ListPods and the v1.Pod → PodList mapping.
//   - upgrade.go: Upgrade and ImagePull, and the checks they share.
//   - validate.go: namespace and name validation of path parameters.
//   - errors.go: gRPC codes, HTTP statuses and API-server error mapping.
//   - rest.go: content negotiation, plain-text bodies and the error handler
//     that keep OpenYurt's and ACK Edge's curl scripts working.
//   - handler.go, serve.go: one port for gRPC, REST and health; shutdown.
package server
