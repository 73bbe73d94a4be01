package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"strings"

	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"

	edgeotav1 "github.com/edgeota/edgeota/gen/go/edgeota/v1"
)

// ceilingCommand runs this binary as the node API's ceiling instead of the
// benchmark: a separate process, as the agent is, so that neither shares a Go
// runtime with the load generator.
const ceilingCommand = "ceiling"

// runCeiling serves, on one port as the agent does (HTTP/1.1 and cleartext
// HTTP/2), GET /pods with the agent's own JSON bytes and gRPC ListPods with
// its own response message: the least work that answers the same thing.
func runCeiling(args []string) error {
	fs := flag.NewFlagSet(ceilingCommand, flag.ContinueOnError)
	addr := fs.String("addr", "127.0.0.1:0", "loopback address to serve on")
	jsonPath := fs.String("json", "", "the GET /pods body to answer with")
	protoPath := fs.String("proto", "", "the ListPodsResponse to answer with, in protobuf wire form")
	if err := fs.Parse(args); err != nil {
		return err
	}
	body, err := os.ReadFile(*jsonPath)
	if err != nil {
		return fmt.Errorf("reading the JSON body: %w", err)
	}
	wire, err := os.ReadFile(*protoPath)
	if err != nil {
		return fmt.Errorf("reading the ListPods response: %w", err)
	}
	resp := &edgeotav1.ListPodsResponse{}
	if err := proto.Unmarshal(wire, resp); err != nil {
		return fmt.Errorf("decoding the ListPods response: %w", err)
	}
	grpcServer := grpc.NewServer()
	edgeotav1.RegisterOTAServiceServer(grpcServer, fixedList{resp: resp})
	protocols := new(http.Protocols)
	protocols.SetHTTP1(true)
	protocols.SetUnencryptedHTTP2(true)
	srv := &http.Server{Protocols: protocols, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.ProtoMajor == 2 && strings.HasPrefix(r.Header.Get("Content-Type"), "application/grpc") {
			grpcServer.ServeHTTP(w, r)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(body)
	})}
	l, err := net.Listen("tcp", *addr)
	if err != nil {
		return fmt.Errorf("listening on %s: %w", *addr, err)
	}
	if err := srv.Serve(l); !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("serving: %w", err)
	}
	return nil
}

// fixedList answers ListPods with one response, whatever is asked.
type fixedList struct {
	edgeotav1.UnimplementedOTAServiceServer
	resp *edgeotav1.ListPodsResponse
}

func (f fixedList) ListPods(context.Context, *edgeotav1.ListPodsRequest) (*edgeotav1.ListPodsResponse, error) {
	return f.resp, nil
}
