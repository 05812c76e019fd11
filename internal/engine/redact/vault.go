package redact

import (
	"bytes"
	"context"
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
)

// KeyProvider supplies the 32-byte AES-256 key that seals a vault.
type KeyProvider interface {
	Key(ctx context.Context) ([]byte, error)
}

// StaticKeyProvider is a key already in memory: for tests, and for a key the caller fetched from a
// Kubernetes Secret.
type StaticKeyProvider []byte

// Key returns a copy of the key, so nothing a caller does to it can change the provider's.
func (k StaticKeyProvider) Key(ctx context.Context) ([]byte, error) {
	return bytes.Clone(k), nil
}

// KeySize is the AES-256 key length every KeyProvider must supply.
const KeySize = 32

// vaultMagic starts every sealed vault. It is authenticated as GCM additional data, so a file cannot
// be relabelled as another format version without failing to open.
var vaultMagic = []byte("ARWVAULT1")

const nonceSize = 12 // the GCM standard nonce

// Sentinel causes wrapped by VaultError, for errors.Is.
var (
	ErrVaultDecrypt   = errors.New("vault.enc cannot be decrypted: wrong key or tampered file")
	ErrVaultTruncated = errors.New("vault.enc is truncated")
	ErrVaultMagic     = errors.New("vault.enc is not an agentrewind vault (bad magic)")
	ErrTokenCollision = errors.New("two different secrets have the same redaction token")
)

// VaultError reports a vault that cannot be sealed or opened. Op is "key" (no usable key), "seal",
// "open" (wrong key, tampered, truncated or foreign file) or "decode" (authentic but unreadable
// contents), "merge" (two secrets for one token). It never carries a secret.
type VaultError struct {
	Op  string
	Err error
}

func (e *VaultError) Error() string { return fmt.Sprintf("vault %s: %v", e.Op, e.Err) }

func (e *VaultError) Unwrap() error { return e.Err }

// Vault maps tokens back to the secrets they replaced. It is safe for concurrent use.
type Vault struct {
	mu        sync.RWMutex
	secrets   map[string]string // token → secret
	collision bool              // Add or Merge met two secrets for one token
}

// NewVault returns an empty vault.
func NewVault() *Vault { return &Vault{secrets: map[string]string{}} }

// Add records that token stands for secret. A token that already stands for another secret is a
// *VaultError wrapping ErrTokenCollision; the vault keeps the first secret and refuses to Seal.
func (v *Vault) Add(token, secret string) error {
	return v.Merge(map[string]string{token: secret})
}

// Merge adds every token → secret pair of m (typically Redactor.Secrets()). A token that already
// stands for another secret is a *VaultError wrapping ErrTokenCollision: one of the two could never
// be restored, so the vault keeps the first, and Seal refuses it from then on, whether or not the
// caller looked at this error.
func (v *Vault) Merge(m map[string]string) error {
	v.mu.Lock()
	defer v.mu.Unlock()
	collided := false
	for token, secret := range m {
		if prev, ok := v.secrets[token]; ok && prev != secret {
			collided = true
			continue
		}
		v.secrets[token] = secret
	}
	if collided {
		v.collision = true
		return &VaultError{Op: "merge", Err: ErrTokenCollision}
	}
	return nil
}

// Len returns the number of tokens the vault can restore.
func (v *Vault) Len() int {
	v.mu.RLock()
	defer v.mu.RUnlock()
	return len(v.secrets)
}

// Restore swaps every known token in s back to its secret; unknown tokens stay as they are, so a
// partial vault degrades to partially redacted output rather than failing.
// A token is known by its text, 32 or (for older recordings) 12 hex characters, whatever follows it.
func (v *Vault) Restore(s string) string {
	v.mu.RLock()
	defer v.mu.RUnlock()
	if !strings.Contains(s, TokenPrefix) {
		return s
	}
	var b strings.Builder
	last := 0
	tokenCandidates(s, func(start, end int) bool {
		secret, ok := v.secrets[s[start:end]]
		if !ok || start < last {
			return false
		}
		b.WriteString(s[last:start])
		b.WriteString(secret)
		last = end
		return true
	})
	if last == 0 {
		return s
	}
	b.WriteString(s[last:])
	return b.String()
}

// RestoreJSON restores tokens in every string leaf and object key of a JSON document, re-emitted like
// Redactor.JSON does (compact, order and number text preserved).
func (v *Vault) RestoreJSON(doc []byte) ([]byte, error) {
	return rewriteJSON(doc, stringRewriter{
		key:   v.Restore,
		value: func(_ string, _ bool, s string) string { return v.Restore(s) },
	})
}

// Seal encrypts the vault with AES-256-GCM: magic "ARWVAULT1", a 12-byte random nonce, then the
// ciphertext (with its tag) of the JSON token → secret map, the magic authenticated as additional data.
// A vault that met two secrets for one token (Add, Merge) is refused with ErrTokenCollision.
func (v *Vault) Seal(ctx context.Context, kp KeyProvider) ([]byte, error) {
	aead, err := newAEAD(ctx, kp)
	if err != nil {
		return nil, err
	}
	v.mu.RLock()
	if v.collision {
		v.mu.RUnlock()
		return nil, &VaultError{Op: "seal", Err: ErrTokenCollision}
	}
	plaintext, err := json.Marshal(v.secrets)
	v.mu.RUnlock()
	if err != nil {
		return nil, &VaultError{Op: "seal", Err: err}
	}
	defer clear(plaintext)
	sealed := make([]byte, 0, len(vaultMagic)+nonceSize+len(plaintext)+aead.Overhead())
	sealed = append(sealed, vaultMagic...)
	nonce := make([]byte, nonceSize)
	if _, err := rand.Read(nonce); err != nil {
		return nil, &VaultError{Op: "seal", Err: err}
	}
	sealed = append(sealed, nonce...)
	return aead.Seal(sealed, nonce, plaintext, vaultMagic), nil
}

// OpenVault decrypts a vault produced by Seal. Any tampering, a wrong key, a truncated or foreign file
// yields a *VaultError with Op "open".
func OpenVault(ctx context.Context, kp KeyProvider, sealed []byte) (*Vault, error) {
	if err := checkFraming(sealed); err != nil {
		return nil, &VaultError{Op: "open", Err: err}
	}
	aead, err := newAEAD(ctx, kp)
	if err != nil {
		return nil, err
	}
	nonce := sealed[len(vaultMagic) : len(vaultMagic)+nonceSize]
	plaintext, err := aead.Open(nil, nonce, sealed[len(vaultMagic)+nonceSize:], vaultMagic)
	if err != nil {
		return nil, &VaultError{Op: "open", Err: ErrVaultDecrypt}
	}
	defer clear(plaintext)
	v := NewVault()
	if err := json.Unmarshal(plaintext, &v.secrets); err != nil {
		return nil, &VaultError{Op: "decode", Err: errors.New("vault.enc contents are not a token map")}
	}
	if v.secrets == nil { // the JSON was "null"
		v.secrets = map[string]string{}
	}
	return v, nil
}

func checkFraming(sealed []byte) error {
	if len(sealed) < len(vaultMagic) && bytes.HasPrefix(vaultMagic, sealed) {
		return ErrVaultTruncated
	}
	if !bytes.HasPrefix(sealed, vaultMagic) {
		return ErrVaultMagic
	}
	if len(sealed) < len(vaultMagic)+nonceSize+16 { // 16: the GCM tag
		return ErrVaultTruncated
	}
	return nil
}

func newAEAD(ctx context.Context, kp KeyProvider) (cipher.AEAD, error) {
	if kp == nil {
		return nil, &VaultError{Op: "key", Err: errors.New("no key provider")}
	}
	key, err := kp.Key(ctx)
	if err != nil {
		return nil, &VaultError{Op: "key", Err: err}
	}
	if len(key) != KeySize {
		return nil, &VaultError{Op: "key", Err: fmt.Errorf("key is %d bytes, AES-256 needs %d", len(key), KeySize)}
	}
	block, err := aes.NewCipher(key)
	if err != nil {
		return nil, &VaultError{Op: "key", Err: err}
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		return nil, &VaultError{Op: "key", Err: err}
	}
	return aead, nil
}
