package idcar_test

import (
	"bufio"
	"bytes"
	"encoding/hex"
	"encoding/json"
	"errors"
	"os"
	"reflect"
	"strings"
	"testing"

	idcar "github.com/idcar/idcar/clients/go"
)

// uuid7Vector is one line of tests/vectors/uuid7.jsonl: an ID with its text forms and
// fields, or text idcar refuses (Error set).
type uuid7Vector struct {
	UUID     string  `json:"uuid"`
	Hex      string  `json:"hex"`
	ULID     string  `json:"ulid"`
	UnixTsMS *int64  `json:"unix_ts_ms"`
	Counter  *int64  `json:"counter"`
	Cluster  *int64  `json:"cluster"`
	Slot     *int64  `json:"slot"`
	Random   *int64  `json:"random"`
	Check    *int64  `json:"check"` // the last byte
	Time     *string `json:"time"`  // null: after 9999, decode refuses it
	Issuer   string  `json:"issuer"`
	Text     string  `json:"text"`
	Error    string  `json:"error"`
	Note     string  `json:"note"`
}

func uuid7Vectors(t *testing.T) []uuid7Vector {
	t.Helper()
	f, err := os.Open("../../tests/vectors/uuid7.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var vs []uuid7Vector
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if strings.TrimSpace(sc.Text()) == "" {
			continue
		}
		var v uuid7Vector
		dec := json.NewDecoder(bytes.NewReader(sc.Bytes()))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&v); err != nil {
			t.Fatalf("uuid7.jsonl line %q: %v", sc.Text(), err)
		}
		vs = append(vs, v)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return vs
}

func uuid7Form(t *testing.T, form string) idcar.Description {
	t.Helper()
	d, err := idcar.LayoutDescription("uuid7")
	if err != nil {
		t.Fatal(err)
	}
	if d.Width != 16 || d.Form != "uuid" || !reflect.DeepEqual(d.Params, map[string]string{"cluster-id": "0"}) {
		t.Fatalf("LayoutDescription(uuid7) = %+v", d)
	}
	d.Form = form
	return d
}

// TestUUID7KnownAnswers checks every line of tests/vectors/uuid7.jsonl: the three text forms
// (written, and read in either case), Decode's keys and values, and the text idcar refuses.
func TestUUID7KnownAnswers(t *testing.T) {
	vs := uuid7Vectors(t)
	var ids, foreign, refused, late int
	for _, v := range vs {
		if v.Error != "" {
			refused++
			// Refused in the form its shape names (as `idcar decode` guesses), and in the others.
			form := "uuid"
			switch {
			case strings.Contains(v.Text, "-"):
			case len(v.Text) == 32:
				form = "hex"
			case len(v.Text) == 26:
				form = "ulid"
			}
			for _, f := range []string{form, "uuid", "hex", "ulid"} {
				if id, err := idcar.Parse(uuid7Form(t, f), v.Text); !errors.Is(err, idcar.ErrInvalidID) {
					t.Errorf("%s (%s): Parse in form %s = %s, %v; want ErrInvalidID", v.Text, v.Note, f, id, err)
				}
			}
			// Text refused as no version-7 UUID is still a well-formed UUID.
			var u idcar.UUID
			if err := u.UnmarshalText([]byte(v.Text)); (err == nil) != (v.Error == "unrecognised") {
				t.Errorf("%s (%s, %s): UUID.UnmarshalText: %v", v.Text, v.Note, v.Error, err)
			}
			continue
		}
		if v.Issuer == "idcar" {
			ids++
		} else {
			foreign++
		}
		want := map[string]string{"uuid": v.UUID, "hex": v.Hex, "ulid": v.ULID}
		var first idcar.ID
		for _, form := range []string{"uuid", "hex", "ulid"} {
			text := want[form]
			if text == "" {
				continue // other generators' lines give no ulid
			}
			d := uuid7Form(t, form)
			for _, in := range []string{text, strings.ToUpper(text), strings.ToLower(text)} {
				id, err := idcar.Parse(d, in)
				if err != nil {
					t.Fatalf("%s: Parse in form %s: %v", in, form, err)
				}
				if got := id.String(); got != text {
					t.Errorf("%s: String() in form %s = %s, want %s", in, form, got, text)
				}
				if got := hex.EncodeToString(id.Bytes()); got != v.Hex {
					t.Errorf("%s: bytes %s, want %s", in, got, v.Hex)
				}
			}
			id, _ := idcar.Parse(d, text)
			if form == "uuid" {
				first = id
			}
			// Written in every form from the same bytes.
			for f, w := range want {
				if w == "" {
					continue
				}
				other, err := idcar.FromBytes(uuid7Form(t, f), id.Bytes())
				if err != nil || other.String() != w {
					t.Errorf("%s: FromBytes in form %s = %s, %v; want %s", text, f, other, err, w)
				}
			}
		}
		if b := first.Bytes(); v.Check != nil && int64(b[15]) != *v.Check {
			t.Errorf("%s: last byte %d, check %d", v.UUID, b[15], *v.Check)
		}
		u, ok := first.UUID()
		if !ok || u.String() != v.UUID {
			t.Errorf("%s: UUID() = %s, %v", v.UUID, u, ok)
		}
		got, err := first.Decode()
		if v.Time == nil {
			late++
			if !errors.Is(err, idcar.ErrInvalidID) {
				t.Errorf("%s (%s): Decode = %v, %v; want ErrInvalidID", v.UUID, v.Note, got, err)
			}
			continue
		}
		if err != nil {
			t.Fatalf("%s: Decode: %v", v.UUID, err)
		}
		fields := map[string]any{
			"layout": "uuid7", "id": v.UUID, "hex": v.Hex, "unix_ts_ms": *v.UnixTsMS,
			"time": *v.Time, "issuer": v.Issuer,
		}
		if v.Issuer == "idcar" {
			fields["counter"], fields["cluster"] = *v.Counter, *v.Cluster
			fields["slot"], fields["random"] = *v.Slot, *v.Random
		}
		if !reflect.DeepEqual(got, fields) {
			t.Errorf("%s (%s): Decode =\n%v\nwant\n%v", v.UUID, v.Note, got, fields)
		}
	}
	if ids < 5 || foreign < 1 || refused < 5 || late != 1 {
		t.Fatalf("uuid7.jsonl: %d idcar IDs, %d foreign, %d refused, %d after 9999: not the known answers", ids, foreign, refused, late)
	}
}

// Decode refuses bytes that are no version-7 UUID, even when FromBytes takes them (it
// checks only the length).
func TestUUID7DecodeRefusesOtherVersions(t *testing.T) {
	d := uuid7Form(t, "uuid")
	for _, raw := range [][]byte{
		make([]byte, 16), // the nil UUID
		{0x91, 0x91, 0x08, 0xf7, 0x52, 0xd1, 0x43, 0x20, 0x9b, 0xac, 0xf8, 0x47, 0xdb, 0x41, 0x48, 0xa8}, // v4
		{0x01, 0x7f, 0x22, 0xe2, 0x79, 0xb0, 0x7c, 0xc3, 0xd8, 0xc4, 0xdc, 0x0c, 0x0c, 0x07, 0x39, 0x8f}, // variant 11
	} {
		id, err := idcar.FromBytes(d, raw)
		if err != nil {
			t.Fatal(err)
		}
		if f, err := id.Decode(); !errors.Is(err, idcar.ErrInvalidID) {
			t.Errorf("Decode(%s) = %v, %v; want ErrInvalidID", id, f, err)
		}
		if _, ok := id.UUID(); !ok {
			t.Errorf("UUID() of a uuid7 ID %s: not ok", id)
		}
	}
	if _, err := idcar.FromBytes(d, make([]byte, 8)); !errors.Is(err, idcar.ErrInvalidID) {
		t.Errorf("FromBytes of 8 bytes: %v, want ErrInvalidID", err)
	}
}

func TestUUIDText(t *testing.T) {
	const text = "01a20180-3c7e-74b5-a873-0009a1b2c3ac"
	d := uuid7Form(t, "uuid")
	id, err := idcar.Parse(d, text)
	if err != nil {
		t.Fatal(err)
	}
	u, ok := id.UUID()
	if !ok {
		t.Fatal("UUID() not ok")
	}
	b, err := json.Marshal(struct{ U idcar.UUID }{u})
	if err != nil || string(b) != `{"U":"`+text+`"}` {
		t.Fatalf("json.Marshal = %s, %v", b, err)
	}
	var back struct{ U idcar.UUID }
	if err := json.Unmarshal([]byte(`{"U":"`+strings.ToUpper(text)+`"}`), &back); err != nil || back.U != u {
		t.Fatalf("json.Unmarshal = %s, %v; want %s", back.U, err, u)
	}
	// Any version: a UUID, not only an idcar ID.
	var v4 idcar.UUID
	if err := v4.UnmarshalText([]byte("919108f7-52d1-4320-9bac-f847db4148a8")); err != nil || v4.String() != "919108f7-52d1-4320-9bac-f847db4148a8" {
		t.Fatalf("UnmarshalText(v4) = %s, %v", v4, err)
	}
	for _, bad := range []string{"", "919108f752d143209bacf847db4148a8", "919108f7-52d1-4320-9bac-f847db4148a", "919108f7_52d1-4320-9bac-f847db4148a8", "919108f7-52d1-4320-9bac-f847db4148ag"} {
		var x idcar.UUID
		if err := x.UnmarshalText([]byte(bad)); !errors.Is(err, idcar.ErrInvalidID) {
			t.Errorf("UnmarshalText(%q): %v, want ErrInvalidID", bad, err)
		}
	}
	// Other layouts' IDs are no UUIDs, muid128's 16 bytes included.
	for layout, text := range map[string]string{"lable64": "7e3c018045810093", "muid128": "5D5EAC793E61F-1BFC71B112D-0000000B"} {
		d, _ := idcar.LayoutDescription(layout)
		id, err := idcar.Parse(d, text)
		if err != nil {
			t.Fatal(err)
		}
		if u, ok := id.UUID(); ok {
			t.Errorf("%s ID %s gave UUID %s", layout, id, u)
		}
	}
	if u, ok := (idcar.ID{}).UUID(); ok {
		t.Errorf("the zero ID gave UUID %s", u)
	}
}
