package redact

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
)

func testKey(b byte) StaticKeyProvider { return StaticKeyProvider(bytes.Repeat([]byte{b}, KeySize)) }

func sealedTestVault(t *testing.T) ([]byte, *Vault) {
	t.Helper()
	v := NewVault()
	v.Add(Token(fakeAnthropicKey), fakeAnthropicKey)
	v.Merge(map[string]string{Token(fakeGitHubPAT): fakeGitHubPAT})
	sealed, err := v.Seal(context.Background(), testKey(7))
	if err != nil {
		t.Fatal(err)
	}
	return sealed, v
}

func TestVaultSealOpenRoundTrip(t *testing.T) {
	sealed, v := sealedTestVault(t)
	if !bytes.HasPrefix(sealed, []byte("ARWVAULT1")) {
		t.Fatalf("sealed vault starts with %q, want the magic", sealed[:9])
	}
	if bytes.Contains(sealed, []byte(fakeAnthropicKey)) {
		t.Fatal("sealed vault contains a secret in clear")
	}
	opened, err := OpenVault(context.Background(), testKey(7), sealed)
	if err != nil {
		t.Fatal(err)
	}
	if opened.Len() != v.Len() || opened.Len() != 2 {
		t.Fatalf("opened vault has %d entries, want 2", opened.Len())
	}
	in := "a " + Token(fakeAnthropicKey) + " b " + Token(fakeGitHubPAT)
	if got, want := opened.Restore(in), "a "+fakeAnthropicKey+" b "+fakeGitHubPAT; got != want {
		t.Fatalf("Restore = %q, want %q", got, want)
	}
}

func TestSealUsesAFreshNonce(t *testing.T) {
	first, v := sealedTestVault(t)
	second, err := v.Seal(context.Background(), testKey(7))
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Equal(first, second) {
		t.Fatal("two seals of the same vault are identical: the nonce is not random")
	}
}

func TestOpenVaultRefusesBadInput(t *testing.T) {
	sealed, _ := sealedTestVault(t)
	flip := func(i int) []byte {
		b := bytes.Clone(sealed)
		b[i] ^= 0x01
		return b
	}
	tests := []struct {
		name   string
		key    KeyProvider
		sealed []byte
		wantOp string
		want   error
	}{
		{"wrong key", testKey(8), sealed, "open", ErrVaultDecrypt},
		{"flipped ciphertext byte", testKey(7), flip(len(sealed) - 20), "open", ErrVaultDecrypt},
		{"flipped tag byte", testKey(7), flip(len(sealed) - 1), "open", ErrVaultDecrypt},
		{"flipped nonce byte", testKey(7), flip(len("ARWVAULT1") + 3), "open", ErrVaultDecrypt},
		{"flipped magic byte", testKey(7), flip(4), "open", ErrVaultMagic},
		{"truncated tail", testKey(7), sealed[:len(sealed)-5], "open", ErrVaultDecrypt},
		{"truncated below framing", testKey(7), sealed[:len("ARWVAULT1")+10], "open", ErrVaultTruncated},
		{"truncated magic", testKey(7), sealed[:4], "open", ErrVaultTruncated},
		{"empty file", testKey(7), nil, "open", ErrVaultTruncated},
		{"foreign file", testKey(7), []byte(`{"not":"a vault"}`), "open", ErrVaultMagic},
		{"short key", StaticKeyProvider(make([]byte, 16)), sealed, "key", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := OpenVault(context.Background(), tt.key, tt.sealed)
			verr, ok := errors.AsType[*VaultError](err)
			if !ok {
				t.Fatalf("err = %v, want *VaultError", err)
			}
			if verr.Op != tt.wantOp {
				t.Fatalf("Op = %q, want %q (%v)", verr.Op, tt.wantOp, err)
			}
			if tt.want != nil && !errors.Is(err, tt.want) {
				t.Fatalf("err = %v, want %v", err, tt.want)
			}
			if strings.Contains(err.Error(), fakeAnthropicKey) {
				t.Fatal("error message carries a secret")
			}
		})
	}
}

func TestWrongKeyMessageSaysWhatHappened(t *testing.T) {
	sealed, _ := sealedTestVault(t)
	_, err := OpenVault(context.Background(), testKey(9), sealed)
	if want := "vault.enc cannot be decrypted: wrong key or tampered file"; err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("err = %v, want it to say %q", err, want)
	}
}

func TestSealRefusesAMissingOrShortKey(t *testing.T) {
	for name, kp := range map[string]KeyProvider{"nil provider": nil, "short key": StaticKeyProvider("short")} {
		t.Run(name, func(t *testing.T) {
			_, err := NewVault().Seal(context.Background(), kp)
			if verr, ok := errors.AsType[*VaultError](err); !ok || verr.Op != "key" {
				t.Fatalf("err = %v, want *VaultError with Op key", err)
			}
		})
	}
}

func TestRestoreSwapsOnlyKnownTokens(t *testing.T) {
	v := NewVault()
	v.Add(Token("s3cret-value"), "s3cret-value")
	unknown := Token("never recorded")
	in := "known=" + Token("s3cret-value") + "abc unknown=" + unknown
	want := "known=s3cret-valueabc unknown=" + unknown
	if got := v.Restore(in); got != want {
		t.Fatalf("Restore = %q, want %q", got, want)
	}
}

func TestRestoreJSONRestoresLeavesAndKeys(t *testing.T) {
	v := NewVault()
	v.Add(Token("k1"), "k1")
	v.Add(Token("<v&1>"), "<v&1>")
	unknown := Token("other")
	doc := `{"` + Token("k1") + `":["` + Token("<v&1>") + `",2.50,"` + unknown + `"]}`
	got, err := v.RestoreJSON([]byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"k1":["<v&1>",2.50,"` + unknown + `"]}`; string(got) != want {
		t.Fatalf("RestoreJSON = %s, want %s", got, want)
	}
}

// TestVaultRefusesTwoSecretsForOneToken: a token that would restore the wrong secret is an error at
// Add and Merge, and the vault then refuses to Seal even if the caller ignored that error.
func TestVaultRefusesTwoSecretsForOneToken(t *testing.T) {
	tok := Token("first secret")
	for name, collide := range map[string]func(v *Vault) error{
		"Add":   func(v *Vault) error { return v.Add(tok, "second secret") },
		"Merge": func(v *Vault) error { return v.Merge(map[string]string{tok: "second secret"}) },
	} {
		t.Run(name, func(t *testing.T) {
			v := NewVault()
			if err := v.Add(tok, "first secret"); err != nil {
				t.Fatal(err)
			}
			if err := v.Add(tok, "first secret"); err != nil {
				t.Fatalf("the same pair twice: %v", err)
			}
			err := collide(v)
			if verr, ok := errors.AsType[*VaultError](err); !ok || verr.Op != "merge" || !errors.Is(err, ErrTokenCollision) {
				t.Fatalf("err = %v, want a merge *VaultError wrapping ErrTokenCollision", err)
			}
			if strings.Contains(err.Error(), "secret\"") || strings.Contains(err.Error(), "first") {
				t.Errorf("the error names a secret: %v", err)
			}
			if got := v.Restore(tok); got != "first secret" {
				t.Errorf("Restore = %q, want the first secret kept", got)
			}
			if _, err := v.Seal(context.Background(), testKey(1)); !errors.Is(err, ErrTokenCollision) {
				t.Errorf("Seal error = %v, want ErrTokenCollision", err)
			}
		})
	}
}

func TestRedactorPanicsRatherThanMapTwoSecretsToOneToken(t *testing.T) {
	r := New(BuiltinPatterns())
	r.secrets[Token(fakeGitHubPAT)] = "another secret" // what a hash collision would leave
	defer func() {
		if p := recover(); p == nil || strings.Contains(fmt.Sprint(p), fakeGitHubPAT) {
			t.Fatalf("recover() = %v, want a panic that names no secret", p)
		}
	}()
	r.String(fakeGitHubPAT)
}
