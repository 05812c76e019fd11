package price

// builtin holds list prices in micro-dollars per million tokens (3_000_000 is $3 per million), as the
// providers published them in late 2025. Prices change: operators override them with the chart's
// prices value, the CLI with --price and --price-file.
//
// Not modelled: Anthropic's one-hour cache writes (twice the input rate; usage does not split them from
// five-minute writes), long-context rates above 200K prompt tokens, batch and priority tiers. OpenAI
// does not bill cache writes apart from input, so its cache-write rate is the input rate.
var builtin = map[Key]Price{
	// Anthropic: input, output, five-minute cache write (1.25x input), cache read (0.1x input).
	{"anthropic", "claude-opus-4-5"}:   {Input: 5_000_000, Output: 25_000_000, CacheWrite: 6_250_000, CacheRead: 500_000},
	{"anthropic", "claude-opus-4-1"}:   {Input: 15_000_000, Output: 75_000_000, CacheWrite: 18_750_000, CacheRead: 1_500_000},
	{"anthropic", "claude-opus-4-0"}:   {Input: 15_000_000, Output: 75_000_000, CacheWrite: 18_750_000, CacheRead: 1_500_000},
	{"anthropic", "claude-opus-4"}:     {Input: 15_000_000, Output: 75_000_000, CacheWrite: 18_750_000, CacheRead: 1_500_000},
	{"anthropic", "claude-sonnet-4-5"}: {Input: 3_000_000, Output: 15_000_000, CacheWrite: 3_750_000, CacheRead: 300_000},
	{"anthropic", "claude-sonnet-4-0"}: {Input: 3_000_000, Output: 15_000_000, CacheWrite: 3_750_000, CacheRead: 300_000},
	{"anthropic", "claude-sonnet-4"}:   {Input: 3_000_000, Output: 15_000_000, CacheWrite: 3_750_000, CacheRead: 300_000},
	{"anthropic", "claude-3-7-sonnet"}: {Input: 3_000_000, Output: 15_000_000, CacheWrite: 3_750_000, CacheRead: 300_000},
	{"anthropic", "claude-haiku-4-5"}:  {Input: 1_000_000, Output: 5_000_000, CacheWrite: 1_250_000, CacheRead: 100_000},
	{"anthropic", "claude-3-5-haiku"}:  {Input: 800_000, Output: 4_000_000, CacheWrite: 1_000_000, CacheRead: 80_000},
	{"anthropic", "claude-3-haiku"}:    {Input: 250_000, Output: 1_250_000, CacheWrite: 300_000, CacheRead: 30_000},

	// OpenAI: input, output, cache write = input, cached input.
	{"openai", "gpt-5"}:             {Input: 1_250_000, Output: 10_000_000, CacheWrite: 1_250_000, CacheRead: 125_000},
	{"openai", "gpt-5-mini"}:        {Input: 250_000, Output: 2_000_000, CacheWrite: 250_000, CacheRead: 25_000},
	{"openai", "gpt-5-nano"}:        {Input: 50_000, Output: 400_000, CacheWrite: 50_000, CacheRead: 5_000},
	{"openai", "gpt-4.1"}:           {Input: 2_000_000, Output: 8_000_000, CacheWrite: 2_000_000, CacheRead: 500_000},
	{"openai", "gpt-4.1-mini"}:      {Input: 400_000, Output: 1_600_000, CacheWrite: 400_000, CacheRead: 100_000},
	{"openai", "gpt-4.1-nano"}:      {Input: 100_000, Output: 400_000, CacheWrite: 100_000, CacheRead: 25_000},
	{"openai", "gpt-4o"}:            {Input: 2_500_000, Output: 10_000_000, CacheWrite: 2_500_000, CacheRead: 1_250_000},
	{"openai", "gpt-4o-2024-05-13"}: {Input: 5_000_000, Output: 15_000_000, CacheWrite: 5_000_000, CacheRead: None},
	{"openai", "gpt-4o-mini"}:       {Input: 150_000, Output: 600_000, CacheWrite: 150_000, CacheRead: 75_000},
	{"openai", "o1"}:                {Input: 15_000_000, Output: 60_000_000, CacheWrite: 15_000_000, CacheRead: 7_500_000},
	{"openai", "o3"}:                {Input: 2_000_000, Output: 8_000_000, CacheWrite: 2_000_000, CacheRead: 500_000},
	{"openai", "o3-mini"}:           {Input: 1_100_000, Output: 4_400_000, CacheWrite: 1_100_000, CacheRead: 550_000},
	{"openai", "o4-mini"}:           {Input: 1_100_000, Output: 4_400_000, CacheWrite: 1_100_000, CacheRead: 275_000},
	{"openai", "gpt-3.5-turbo"}:     {Input: 500_000, Output: 1_500_000, CacheWrite: 500_000, CacheRead: None},
}
