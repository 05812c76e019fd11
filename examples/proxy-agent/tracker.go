package main

import (
	"encoding/json"
	"io"
	"net/http"
)

// trackerHandler is a stand-in issue tracker, the HTTP tool backend behind the proxy's tool gateway
// (`proxy-agent tracker [ADDR]` serves it): POST /search answers the related issues, POST /label
// answers the labels the issue now has.
func trackerHandler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /search", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"issues":[{"number":812,"title":"crash on save with unsaved buffers","owner":"@editor-core"}]}`)
	})
	mux.HandleFunc("POST /label", func(w http.ResponseWriter, r *http.Request) {
		var in struct {
			Label string `json:"label"`
		}
		if err := json.NewDecoder(io.LimitReader(r.Body, 1<<20)).Decode(&in); err != nil || in.Label == "" {
			http.Error(w, `{"error":"send {\"label\": \"...\"}"}`, http.StatusBadRequest)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]any{"issue": 42, "labels": []string{in.Label}})
	})
	return mux
}
