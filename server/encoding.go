package server

import (
	"sync"

	"github.com/grpc-ecosystem/grpc-gateway/v2/runtime"
	"google.golang.org/grpc/encoding"
	protocodec "google.golang.org/grpc/encoding/proto"
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/proto"

	edgeotav1 "github.com/edgeota/edgeota/gen/go/edgeota/v1"
)

// encodingMemo remembers the encoding of the last PodList encoded. ListPods
// hands out the same, unchanging message until the cache changes (see
// podList), so its encoding — most of the cost of answering a poll of a full
// node — is reused as long as the message is. E is the encoding's type.
type encodingMemo[E any] struct {
	mu   sync.Mutex
	resp *edgeotav1.ListPodsResponse
	enc  E
}

// encode returns v encoded by encodeFn, from memory when v is the PodList
// encoded last.
func (m *encodingMemo[E]) encode(v any, encodeFn func(any) (E, error)) (E, error) {
	resp, ok := v.(*edgeotav1.ListPodsResponse)
	if !ok {
		return encodeFn(v)
	}
	m.mu.Lock()
	if m.resp == resp {
		defer m.mu.Unlock()
		return m.enc, nil
	}
	m.mu.Unlock()
	enc, err := encodeFn(resp)
	if err != nil {
		return enc, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.resp, m.enc = resp, enc
	return enc, nil
}

// listMarshaler is the gateway's JSON marshaler, with PodLists remembered.
type listMarshaler struct {
	runtime.Marshaler
	memo *encodingMemo[[]byte]
}

// Marshal encodes v as JSON.
func (m listMarshaler) Marshal(v any) ([]byte, error) {
	return m.memo.encode(v, m.Marshaler.Marshal)
}

// listCodec is grpc-go's protobuf codec, with PodLists remembered.
type listCodec struct {
	encoding.CodecV2
	memo *encodingMemo[mem.BufferSlice]
}

func newListCodec() listCodec {
	return listCodec{encoding.GetCodecV2(protocodec.Name), &encodingMemo[mem.BufferSlice]{}}
}

// Marshal encodes v as protobuf. A remembered PodList lives in a plain
// slice, never in one of grpc-go's pooled buffers, which are recycled once
// sent.
func (c listCodec) Marshal(v any) (mem.BufferSlice, error) {
	if _, ok := v.(*edgeotav1.ListPodsResponse); !ok {
		return c.CodecV2.Marshal(v)
	}
	return c.memo.encode(v, func(v any) (mem.BufferSlice, error) {
		b, err := proto.Marshal(v.(proto.Message))
		return mem.BufferSlice{mem.SliceBuffer(b)}, err
	})
}
