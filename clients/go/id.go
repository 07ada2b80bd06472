package idcar

import (
	"encoding/binary"
	"fmt"
)

// Description is what a server tells about its IDs in answer to a describe request: the
// layout, the width of its binary IDs, its default text form and every parameter that
// shapes them (flag names without dashes, values as text).
type Description struct {
	Layout string            `json:"layout"` // lable64, ugd60, si53, sno80, muid128 or uuid7
	Width  int               `json:"width"`  // bytes per binary ID: 8, 10 or 16
	Form   string            `json:"form"`   // default text form: hex, b64, dec, b32, muid or uuid
	Params map[string]string `json:"params"` // e.g. {"mid-bits": "5"} for si53
}

var layoutDefaults = map[string]Description{
	"lable64": {Layout: "lable64", Width: 8, Form: "hex", Params: map[string]string{"cluster-id": "0"}},
	"ugd60":   {Layout: "ugd60", Width: 8, Form: "b64", Params: map[string]string{}},
	"si53": {Layout: "si53", Width: 8, Form: "dec", Params: map[string]string{
		"base-clock": "1577836800000", "mid-bits": "5"}},
	"sno80": {Layout: "sno80", Width: 10, Form: "b32", Params: map[string]string{
		"sequence-max": "65535", "sequence-min": "0"}},
	"muid128": {Layout: "muid128", Width: 16, Form: "muid", Params: map[string]string{
		"medallion-base": "0x10000000000"}},
	"uuid7": {Layout: "uuid7", Width: 16, Form: "uuid", Params: map[string]string{"cluster-id": "0"}},
}

// LayoutDescription returns the description a server of the layout gives with default
// parameters, for formatting and decoding IDs without a server (see FromBytes and Parse).
// Set Params to match the server's flags where they differ (si53's "mid-bits" and
// "base-clock"), and Form to read or write another of the layout's text forms (uuid7's
// "hex" or "ulid").
func LayoutDescription(layout string) (Description, error) {
	d, ok := layoutDefaults[layout]
	if !ok {
		return Description{}, fmt.Errorf("%w: unknown layout %q", ErrInvalidID, layout)
	}
	return d.clone(), nil
}

func (d Description) clone() Description {
	if d.Params != nil {
		p := make(map[string]string, len(d.Params))
		for k, v := range d.Params {
			p[k] = v
		}
		d.Params = p
	}
	return d
}

// ID is one ID as the server issued it: its raw big-endian bytes and the description of
// the layout it belongs to. The zero ID is empty. Compare IDs by Bytes or String.
type ID struct {
	b [16]byte
	n uint8
	d *Description
}

func newID(d *Description, raw []byte) ID {
	id := ID{n: uint8(len(raw)), d: d}
	copy(id.b[:], raw)
	return id
}

// FromBytes makes an ID of the described layout from its binary form (as the server sends
// it: lable64, ugd60 and si53 a big-endian u64, sno80 10 bytes, muid128 and uuid7 16
// bytes). Only the length is checked here; Decode refuses bytes that are no ID of the
// layout.
func FromBytes(d Description, raw []byte) (ID, error) {
	if d.Width < 1 || d.Width > 16 || len(raw) != d.Width {
		return ID{}, fmt.Errorf("%w: %s IDs are %d bytes, got %d", ErrInvalidID, d.Layout, d.Width, len(raw))
	}
	d = d.clone()
	return newID(&d, raw), nil
}

// Parse reads an ID in the described layout's default text form (d.Form), as String
// writes it and as idcar prints it. Hex digits and uuid7's ulid form are read in either
// case. Like idcar, it refuses uuid7 text that is not a version-7 UUID with RFC 9562's
// variant.
func Parse(d Description, text string) (ID, error) {
	raw, err := parseText(d, text)
	if err != nil {
		return ID{}, fmt.Errorf("%w: %q is not a %s ID in form %s: %v", ErrInvalidID, text, d.Layout, d.Form, err)
	}
	if d.Layout == "uuid7" && len(raw) == 16 {
		if err := uuid7Check(raw); err != nil {
			return ID{}, fmt.Errorf("%w: %q is not a uuid7 ID: %v", ErrInvalidID, text, err)
		}
	}
	return FromBytes(d, raw)
}

// Bytes returns a copy of the ID's binary form (8, 10 or 16 bytes, big-endian).
func (id ID) Bytes() []byte { return append([]byte(nil), id.b[:id.n]...) }

// Uint64 returns the ID as an integer; ok is false unless the layout's IDs are 8 bytes
// (lable64, ugd60, si53). For uuid7 IDs see UUID.
func (id ID) Uint64() (v uint64, ok bool) {
	if id.n != 8 {
		return 0, false
	}
	return binary.BigEndian.Uint64(id.b[:8]), true
}

// Layout returns the name of the ID's layout ("" for the zero ID).
func (id ID) Layout() string {
	if id.d == nil {
		return ""
	}
	return id.d.Layout
}

// Description returns the description of the server that issued the ID.
func (id ID) Description() Description {
	if id.d == nil {
		return Description{}
	}
	return id.d.clone()
}

// String returns the ID in its layout's default text form, exactly as idcar prints it:
// lable64 16 hex digits, ugd60 b64, si53 decimal, sno80 b32, muid128 the muid form, uuid7
// the canonical lower-case UUID text.
func (id ID) String() string {
	if id.n == 0 {
		return ""
	}
	form := ""
	if id.d != nil {
		form = id.d.Form
	}
	return formatText(form, id.b[:id.n])
}

// MarshalText encodes the ID as its String form (so it is a JSON string).
func (id ID) MarshalText() ([]byte, error) { return []byte(id.String()), nil }

// Decode returns the ID's fields with the same keys and values as
// `idcar decode --json`: integers as int64, everything else as strings.
func (id ID) Decode() (map[string]any, error) {
	if id.d == nil {
		return nil, fmt.Errorf("%w: the zero ID has no layout", ErrInvalidID)
	}
	return decode(id.d, id.b[:id.n])
}
