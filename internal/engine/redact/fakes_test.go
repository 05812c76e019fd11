package redact

import "strings"

// Fake credentials are assembled at run time so the source never holds a string that a secret
// scanner (or a reviewer) would mistake for a real key.
var (
	fakeAnthropicKey = "sk-ant-" + "api03-" + strings.Repeat("Ab3_", 20) + "xYz-AA"
	fakeOpenAILegacy = "sk-" + strings.Repeat("a1B2c3", 8)
	fakeOpenAIProj   = "sk-" + "proj-" + strings.Repeat("Q7_r-", 12) + "z9"
	fakeAWSKeyID     = "AKIA" + "IOSFODNN7EXAMPLE"
	fakeAWSSTSKeyID  = "ASIA" + "Z2QX7EXAMPLE4KEY"
	fakeAWSSecret    = "wJalrXUtnFEMI/K7MDENG/" + "bPxRfiCYEXAMPLEKEY" // 40 characters
	fakeGitHubPAT    = "ghp_" + strings.Repeat("x1Y2", 9)              // 36 after the prefix
	fakeGitHubFine   = "github_pat_" + strings.Repeat("11AbC", 5) + "_" + strings.Repeat("zZ9", 20)
	fakeJWT          = "eyJhbGciOiJIUzI1NiJ9." + "eyJzdWIiOiIxMjMifQ." + "c2lnbmF0dXJlLWhlcmU"
)
