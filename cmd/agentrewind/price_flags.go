package main

import (
	"fmt"
	"io"
	"os"

	"github.com/spf13/pflag"

	"github.com/agentrewind/agentrewind/internal/engine/price"
)

// maxPriceFile bounds a price file: a table of every model of every provider is a few kilobytes.
const maxPriceFile = 1 << 20

// priceOptions are the flags that override the built-in price table: a file, then single prices.
type priceOptions struct {
	file   string
	prices []string
}

func (o *priceOptions) register(f *pflag.FlagSet) {
	f.StringVar(&o.file, "price-file", "", "YAML or JSON file of prices in US dollars per million tokens, {provider: {model: {input, output, cacheWrite, cacheRead}}}, "+
		"over the built-in list prices (a model without a price shows its cost as unknown)")
	f.StringArrayVar(&o.prices, "price", nil, "a price over the built-in list and --price-file: provider/model=input,output[,cacheWrite[,cacheRead]] "+
		"in US dollars per million tokens, e.g. anthropic/claude-sonnet-4-5=3,15,3.75,0.30 (repeatable)")
}

// table is the built-in price table with the file's prices and then the flags' over it.
func (o *priceOptions) table() (*price.Table, error) {
	table := price.Default()
	if o.file != "" {
		f, err := os.Open(o.file)
		if err != nil {
			return nil, fmt.Errorf("--price-file: %w", err)
		}
		defer f.Close()
		data, err := io.ReadAll(io.LimitReader(f, maxPriceFile+1))
		if err != nil {
			return nil, fmt.Errorf("--price-file %s: %w", o.file, err)
		}
		if len(data) > maxPriceFile {
			return nil, fmt.Errorf("--price-file %s is over %d bytes: a price file lists models, not data", o.file, maxPriceFile)
		}
		prices, err := price.Parse(data)
		if err != nil {
			return nil, fmt.Errorf("--price-file %s: %w", o.file, err)
		}
		table = table.With(prices)
	}
	for _, s := range o.prices {
		k, p, err := price.ParseFlag(s)
		if err != nil {
			return nil, fmt.Errorf("--price: %w", err)
		}
		table = table.With(map[price.Key]price.Price{k: p})
	}
	return table, nil
}
