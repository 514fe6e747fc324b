package creds

import (
	"fmt"
	"io"

	"google.golang.org/protobuf/encoding/protowire"
)

// Version 1 body: one varint-length-delimited CredentialsProto
// (hadoop-common Security.proto):
//
//	CredentialsProto   { repeated CredentialsKVProto tokens = 1; repeated CredentialsKVProto secrets = 2; }
//	CredentialsKVProto { string alias = 1; TokenProto token = 2; bytes secret = 3; }
//	TokenProto         { bytes identifier = 1; bytes password = 2; string kind = 3; string service = 4; }
//
// Hadoop marks alias and the TokenProto fields required; this reader treats
// a missing one as empty. Unknown fields are skipped.
func (d *decoder) protobuf() (*Credentials, error) {
	rest := make([]byte, d.r.Len())
	if _, err := io.ReadFull(d.r, rest); err != nil {
		return nil, ErrTruncated
	}
	n, l := protowire.ConsumeVarint(rest)
	if l < 0 {
		return nil, fmt.Errorf("message length: %w", ErrTruncated)
	}
	rest = rest[l:]
	if n > uint64(len(rest)) {
		return nil, fmt.Errorf("message of %d bytes: %w", n, ErrTruncated)
	}
	c := New()
	var ntok, nsec int
	err := eachField(rest[:n], func(num protowire.Number, v []byte) error {
		switch num {
		case 1:
			if ntok++; ntok > MaxEntries {
				return fmt.Errorf("%w: more than %d tokens", ErrTooLarge, MaxEntries)
			}
			alias, tok, _, err := parseKV(v)
			if err != nil {
				return fmt.Errorf("token %d: %w", ntok-1, err)
			}
			c.Tokens[alias] = tok
		case 2:
			if nsec++; nsec > MaxEntries {
				return fmt.Errorf("%w: more than %d secrets", ErrTooLarge, MaxEntries)
			}
			alias, _, secret, err := parseKV(v)
			if err != nil {
				return fmt.Errorf("secret %d: %w", nsec-1, err)
			}
			c.Secrets[alias] = secret
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return c, nil
}

func parseKV(b []byte) (alias string, tok Token, secret []byte, err error) {
	tok = Token{Identifier: []byte{}, Password: []byte{}}
	secret = []byte{}
	err = eachField(b, func(num protowire.Number, v []byte) error {
		if num == 1 || num == 3 {
			if err := leaf(v); err != nil {
				return err
			}
		}
		switch num {
		case 1:
			alias = string(v)
		case 2:
			t, err := parseTokenProto(v)
			if err != nil {
				return fmt.Errorf("token: %w", err)
			}
			tok = t
		case 3:
			secret = clone(v)
		}
		return nil
	})
	return alias, tok, secret, err
}

func parseTokenProto(b []byte) (Token, error) {
	t := Token{Identifier: []byte{}, Password: []byte{}}
	err := eachField(b, func(num protowire.Number, v []byte) error {
		if err := leaf(v); err != nil {
			return err
		}
		switch num {
		case 1:
			t.Identifier = clone(v)
		case 2:
			t.Password = clone(v)
		case 3:
			t.Kind = string(v)
		case 4:
			t.Service = string(v)
		}
		return nil
	})
	return t, err
}

// eachField calls fn with the payload of every length-delimited field in b
// and skips fields of other wire types. Payloads alias b.
func eachField(b []byte, fn func(protowire.Number, []byte) error) error {
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return fmt.Errorf("%w: %w", errProtobuf, protowire.ParseError(n))
		}
		b = b[n:]
		if typ != protowire.BytesType {
			n = protowire.ConsumeFieldValue(num, typ, b)
			if n < 0 {
				return fmt.Errorf("%w: %w", errProtobuf, protowire.ParseError(n))
			}
			b = b[n:]
			continue
		}
		v, n := protowire.ConsumeBytes(b)
		if n < 0 {
			return fmt.Errorf("%w: %w", errProtobuf, protowire.ParseError(n))
		}
		b = b[n:]
		if err := fn(num, v); err != nil {
			return err
		}
	}
	return nil
}

func clone(b []byte) []byte { return append([]byte{}, b...) }

// leaf checks the size of a field that becomes a token or secret value.
func leaf(v []byte) error {
	if len(v) > MaxFieldSize {
		return fmt.Errorf("%w: field of %d bytes (at most %d)", ErrTooLarge, len(v), MaxFieldSize)
	}
	return nil
}
