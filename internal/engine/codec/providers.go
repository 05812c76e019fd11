package codec

import (
	"github.com/agentrewind/agentrewind/internal/engine/codec/anthropic"
	"github.com/agentrewind/agentrewind/internal/engine/codec/openai"
	"github.com/agentrewind/agentrewind/internal/engine/replay"
)

// ForProvider is the codec the recorder used for a provider's model calls, so a reader that
// recomputes fingerprints (verify, compare, the web timeline) strips the same volatile fields; nil,
// the generic codec, for a provider without one of its own. It is a replay.CodecLookup.
func ForProvider(provider string) replay.Codec {
	switch provider {
	case anthropic.Provider:
		return anthropic.Codec{}
	case openai.Provider:
		return openai.Codec{}
	case openai.ResponsesProvider:
		return openai.ResponsesCodec{}
	}
	return nil
}
