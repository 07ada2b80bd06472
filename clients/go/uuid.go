package idcar

import (
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
)

// UUID is an RFC 9562 UUID: 16 bytes, big-endian, as a uuid7 server issues its IDs. Its
// String is the canonical lower-case text (8-4-4-4-12 hex digits). Being a [16]byte, it
// converts to the UUID types of other packages that are [16]byte as well (for example
// uuid.UUID(u) with github.com/google/uuid) and is comparable, so it can be a map key.
type UUID [16]byte

// UUID returns the ID as a UUID; ok is false unless the ID belongs to the uuid7 layout.
func (id ID) UUID() (u UUID, ok bool) {
	if id.n != 16 || id.d == nil || id.d.Layout != "uuid7" {
		return UUID{}, false
	}
	return UUID(id.b), true
}

// String returns the canonical text of the UUID: 32 lower-case hex digits in 8-4-4-4-12
// groups joined by "-", e.g. 01a20180-3c7e-74b5-a873-0009a1b2c3ac.
func (u UUID) String() string { return uuidText(u[:]) }

// MarshalText encodes the UUID as its String form (so it is a JSON string).
func (u UUID) MarshalText() ([]byte, error) { return []byte(u.String()), nil }

// UnmarshalText reads the canonical text of a UUID (of any version), in either case.
func (u *UUID) UnmarshalText(text []byte) error {
	raw, err := parseUUIDText(string(text))
	if err != nil {
		return fmt.Errorf("%w: %q is not a UUID: %v", ErrInvalidID, text, err)
	}
	copy(u[:], raw)
	return nil
}

// crockford is the alphabet of the ulid form: Crockford's base32.
const crockford = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"

// crockfordValue maps each ASCII byte of crockford, in either case, to its value; 0xff
// for the rest.
var crockfordValue = func() (t [256]byte) {
	for i := range t {
		t[i] = 0xff
	}
	for i := 0; i < len(crockford); i++ {
		t[crockford[i]] = byte(i)
		t[crockford[i]|0x20] = byte(i) // lower case (digits are unchanged)
	}
	return t
}()

// uuidText writes 16 bytes as the canonical UUID text.
func uuidText(raw []byte) string {
	var h [32]byte
	hex.Encode(h[:], raw)
	var out [36]byte
	copy(out[0:8], h[0:8])
	copy(out[9:13], h[8:12])
	copy(out[14:18], h[12:16])
	copy(out[19:23], h[16:20])
	copy(out[24:36], h[20:32])
	out[8], out[13], out[18], out[23] = '-', '-', '-', '-'
	return string(out[:])
}

// parseUUIDText reads the canonical UUID text (8-4-4-4-12 hex digits, either case).
func parseUUIDText(text string) ([]byte, error) {
	if len(text) != 36 {
		return nil, fmt.Errorf("%d characters, not 36 (8-4-4-4-12 hex digits)", len(text))
	}
	var h [32]byte
	k := 0
	for i := 0; i < len(text); i++ {
		c := text[i]
		if i == 8 || i == 13 || i == 18 || i == 23 {
			if c != '-' {
				return nil, fmt.Errorf("%q at %d, not '-' (8-4-4-4-12 hex digits)", c, i)
			}
			continue
		}
		h[k] = c
		k++
	}
	raw := make([]byte, 16)
	if _, err := hex.Decode(raw, h[:]); err != nil {
		return nil, err
	}
	return raw, nil
}

// ulidText writes 16 bytes as 26 characters of Crockford base32: character i is
// (v >> (125 - 5i)) & 31 of the 128-bit value v.
func ulidText(raw []byte) string {
	hi, lo := binary.BigEndian.Uint64(raw[:8]), binary.BigEndian.Uint64(raw[8:])
	var out [26]byte
	for i := range out {
		s := uint(125 - 5*i)
		var d uint64
		switch {
		case s >= 64:
			d = hi >> (s - 64)
		case s > 59: // the 5 bits straddle the halves
			d = hi<<(64-s) | lo>>s
		default:
			d = lo >> s
		}
		out[i] = crockford[d&31]
	}
	return string(out[:])
}

// parseULIDText reads 26 characters of Crockford base32 (either case) into 16 bytes.
func parseULIDText(text string) ([]byte, error) {
	if len(text) != 26 {
		return nil, fmt.Errorf("%d characters, not 26", len(text))
	}
	var hi, lo uint64
	for i := 0; i < len(text); i++ {
		d := crockfordValue[text[i]]
		if d == 0xff {
			return nil, fmt.Errorf("%q at %d is not a Crockford base32 digit (0-9, A-Z without I, L, O, U)", text[i], i)
		}
		if i == 0 && d > 7 {
			return nil, errors.New("the first character is above 7: more than 128 bits")
		}
		hi = hi<<5 | lo>>59
		lo = lo<<5 | uint64(d)
	}
	raw := make([]byte, 16)
	binary.BigEndian.PutUint64(raw[:8], hi)
	binary.BigEndian.PutUint64(raw[8:], lo)
	return raw, nil
}

// uuid7Check refuses 16 bytes that are not a version-7 UUID with RFC 9562's variant (10).
func uuid7Check(raw []byte) error {
	hi, lo := binary.BigEndian.Uint64(raw[:8]), binary.BigEndian.Uint64(raw[8:])
	if v := (hi >> 12) & 15; v != 7 {
		return fmt.Errorf("version %d, not 7 (the 13th hex digit of a UUIDv7 is 7)", v)
	}
	if v := lo >> 62; v != 2 {
		return fmt.Errorf("variant bits %02b, not 10 (the 17th hex digit of a UUIDv7 is 8, 9, a or b)", v)
	}
	return nil
}
