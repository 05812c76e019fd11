package price

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math/big"
	"regexp"
	"slices"
	"strings"

	"sigs.k8s.io/yaml"
)

// maxRate bounds a price: a million dollars per million tokens is far past any list price, and keeps a
// rate times a token count well inside 128 bits.
const maxRate = Rate(1_000_000_000_000)

// providerPattern and modelPattern are what provider and model names in a price may hold.
var (
	providerPattern = regexp.MustCompile(`^[a-z0-9][a-z0-9._-]{0,63}$`)
	modelPattern    = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._:@/-]{0,255}$`)
)

// decimalPattern is a plain decimal with an optional short exponent: a long exponent would make an
// exact reading cost memory in its size.
var decimalPattern = regexp.MustCompile(`^[0-9]+(\.[0-9]+)?([eE][+-]?[0-9]{1,2})?$`)

// Error is a price file or flag that cannot be read, naming the field.
type Error struct {
	Field string // provider.model.class, or the flag's text
	Msg   string
}

func (e *Error) Error() string { return fmt.Sprintf("price %s: %s", e.Field, e.Msg) }

// fields are a price's token classes as a file spells them.
var fields = []string{"input", "output", "cacheWrite", "cacheRead"}

// Parse reads a price file: YAML or JSON mapping provider to model to prices in US dollars per million
// tokens, as numbers or decimal strings with at most six decimals.
//
//	anthropic:
//	  claude-sonnet-4-5: {input: 3, output: 15, cacheWrite: 3.75, cacheRead: 0.30}
//	openai:
//	  gpt-4o: {input: 2.50, output: 10, cacheRead: 1.25}
//
// input and output are required; a cache class left out has no price, so a call that used it is
// unpriced, except an OpenAI cache write, which is billed as input.
func Parse(data []byte) (map[Key]Price, error) {
	doc, err := yaml.YAMLToJSON(data)
	if err != nil {
		return nil, &Error{Field: "file", Msg: err.Error()}
	}
	if bytes.Equal(bytes.TrimSpace(doc), []byte("null")) {
		return map[Key]Price{}, nil
	}
	dec := json.NewDecoder(bytes.NewReader(doc))
	dec.UseNumber()
	var file map[string]map[string]map[string]any
	if err := dec.Decode(&file); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) {
			return nil, &Error{Field: te.Field, Msg: "want provider: {model: {input: …, output: …}}, found a " + te.Value}
		}
		return nil, &Error{Field: "file", Msg: err.Error()}
	}
	out := map[Key]Price{}
	for provider, models := range file {
		if !providerPattern.MatchString(provider) {
			return nil, &Error{Field: fmt.Sprintf("%q", provider), Msg: "a provider is lower-case letters, digits and ._- (anthropic, openai)"}
		}
		for model, classes := range models {
			field := provider + "." + model
			if !modelPattern.MatchString(model) {
				return nil, &Error{Field: fmt.Sprintf("%s.%q", provider, model), Msg: "a model is letters, digits and ._:@/-"}
			}
			p, err := priceOf(provider, field, classes)
			if err != nil {
				return nil, err
			}
			out[Key{provider, model}] = p
		}
	}
	return out, nil
}

func priceOf(provider, field string, classes map[string]any) (Price, error) {
	for name := range classes {
		if !slices.Contains(fields, name) {
			return Price{}, &Error{Field: field + "." + name, Msg: "not a price: use " + strings.Join(fields, ", ")}
		}
	}
	rates := make([]Rate, len(fields))
	for i, name := range fields {
		v, ok := classes[name]
		if !ok {
			if i < 2 {
				return Price{}, &Error{Field: field + "." + name, Msg: "required"}
			}
			rates[i] = None
			continue
		}
		var text string
		switch v := v.(type) {
		case json.Number:
			text = v.String()
		case string:
			text = v
		default:
			return Price{}, &Error{Field: field + "." + name, Msg: fmt.Sprintf("%v is not a number of US dollars per million tokens", v)}
		}
		r, err := ParseRate(text)
		if err != nil {
			return Price{}, &Error{Field: field + "." + name, Msg: err.Error()}
		}
		rates[i] = r
	}
	p := Price{Input: rates[0], Output: rates[1], CacheWrite: rates[2], CacheRead: rates[3]}
	if p.CacheWrite == None && providerOf(provider) == "openai" {
		p.CacheWrite = p.Input
	}
	return p, nil
}

// ParseRate reads US dollars per million tokens, "3", "0.30", "1.25e-1", exactly: never through a float.
func ParseRate(text string) (Rate, error) {
	s := strings.TrimSpace(text)
	if strings.HasPrefix(s, "-") && decimalPattern.MatchString(s[1:]) {
		return 0, fmt.Errorf("%s is negative", s)
	}
	r, ok := new(big.Rat).SetString(s)
	if !decimalPattern.MatchString(s) || !ok {
		return 0, fmt.Errorf("%q is not a decimal number of US dollars per million tokens", text)
	}
	r.Mul(r, big.NewRat(1_000_000, 1))
	if !r.IsInt() {
		return 0, fmt.Errorf("%s has more than six decimals: prices are kept to the millionth of a dollar per million tokens", s)
	}
	if r.Num().Cmp(big.NewInt(int64(maxRate))) > 0 {
		return 0, fmt.Errorf("%s is more than $1,000,000 per million tokens", s)
	}
	return Rate(r.Num().Int64()), nil
}

// ParseFlag reads one price as a flag gives it: provider/model=input,output[,cacheWrite[,cacheRead]]
// in US dollars per million tokens; an empty cache field has no price.
func ParseFlag(s string) (Key, Price, error) {
	name, values, ok := strings.Cut(s, "=")
	provider, model, slash := strings.Cut(name, "/")
	if !ok || !slash || !providerPattern.MatchString(provider) || !modelPattern.MatchString(model) {
		return Key{}, Price{}, &Error{Field: fmt.Sprintf("%q", s), Msg: "want provider/model=input,output[,cacheWrite[,cacheRead]] in US dollars per million tokens, e.g. anthropic/claude-sonnet-4-5=3,15,3.75,0.30"}
	}
	parts := strings.Split(values, ",")
	if len(parts) < 2 || len(parts) > 4 {
		return Key{}, Price{}, &Error{Field: fmt.Sprintf("%q", s), Msg: fmt.Sprintf("%d prices: give input,output and optionally cacheWrite,cacheRead", len(parts))}
	}
	classes := map[string]any{}
	for i, p := range parts {
		if strings.TrimSpace(p) != "" || i < 2 {
			classes[fields[i]] = p
		}
	}
	p, err := priceOf(provider, name, classes)
	return Key{provider, model}, p, err
}
