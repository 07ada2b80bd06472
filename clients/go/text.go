package idcar

import (
	"encoding/binary"
	"encoding/hex"
	"errors"
	"math/bits"
	"strconv"
	"strings"
)

const (
	ugd60Alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
	sno80Alphabet = "23456789abcdefghijklmnopqrstuvwx"
)

// formatText writes raw in the text form: hex, dec, i64 (8-byte IDs), b64 (ugd60), b32
// (sno80), muid (muid128), uuid and ulid (uuid7). A form that does not fit the width falls
// back to hex.
func formatText(form string, raw []byte) string {
	switch {
	case form == "dec" && len(raw) == 8:
		return strconv.FormatUint(binary.BigEndian.Uint64(raw), 10)
	case form == "i64" && len(raw) == 8:
		return strconv.FormatInt(int64(binary.BigEndian.Uint64(raw)), 10)
	case form == "b64" && len(raw) == 8:
		return ugd60Text(binary.BigEndian.Uint64(raw))
	case form == "b32" && len(raw) == 10:
		return sno80Text(raw)
	case form == "muid" && len(raw) == 16:
		h := strings.ToUpper(hex.EncodeToString(raw))
		return h[:13] + "-" + h[13:24] + "-" + h[24:]
	case form == "uuid" && len(raw) == 16:
		return uuidText(raw)
	case form == "ulid" && len(raw) == 16:
		return ulidText(raw)
	}
	return hex.EncodeToString(raw)
}

// ugd60Text: the storage value's 32-bit timestamp bit-reversed, then ten 6-bit groups.
func ugd60Text(s uint64) string {
	v := uint64(bits.Reverse32(uint32(s>>28)))<<28 | s&(1<<28-1)
	var out [10]byte
	for i := range out {
		out[i] = ugd60Alphabet[(v>>(54-6*i))&63]
	}
	return string(out[:])
}

// sno80Text: the 80 bits as sixteen 5-bit groups, as two 40-bit halves of eight groups.
func sno80Text(raw []byte) string {
	var out [16]byte
	for half := 0; half < 2; half++ {
		var v uint64
		for _, b := range raw[5*half : 5*half+5] {
			v = v<<8 | uint64(b)
		}
		for i := 0; i < 8; i++ {
			out[8*half+i] = sno80Alphabet[(v>>(35-5*i))&31]
		}
	}
	return string(out[:])
}

var errBadText = errors.New("bad text")

// parseText reads text in d.Form into d.Width bytes.
func parseText(d Description, text string) ([]byte, error) {
	raw := make([]byte, d.Width)
	switch {
	case d.Form == "hex":
		b, err := hex.DecodeString(text)
		if err != nil {
			return nil, err
		}
		if len(b) != d.Width {
			return nil, errors.New("wrong number of hex digits")
		}
		return b, nil
	case d.Form == "dec" && d.Width == 8:
		v, err := strconv.ParseUint(text, 10, 64)
		if err != nil {
			return nil, err
		}
		binary.BigEndian.PutUint64(raw, v)
	case d.Form == "i64" && d.Width == 8:
		v, err := strconv.ParseInt(text, 10, 64)
		if err != nil {
			return nil, err
		}
		binary.BigEndian.PutUint64(raw, uint64(v))
	case d.Form == "b64" && d.Width == 8:
		if len(text) != 10 {
			return nil, errors.New("not 10 characters")
		}
		var v uint64
		for i := 0; i < len(text); i++ {
			k := strings.IndexByte(ugd60Alphabet, text[i])
			if k < 0 {
				return nil, errBadText
			}
			v = v<<6 | uint64(k)
		}
		s := uint64(bits.Reverse32(uint32(v>>28)))<<28 | v&(1<<28-1)
		binary.BigEndian.PutUint64(raw, s)
	case d.Form == "b32" && d.Width == 10:
		if len(text) != 16 {
			return nil, errors.New("not 16 characters")
		}
		for half := 0; half < 2; half++ {
			var v uint64
			for i := 0; i < 8; i++ {
				k := strings.IndexByte(sno80Alphabet, text[8*half+i])
				if k < 0 {
					return nil, errBadText
				}
				v = v<<5 | uint64(k)
			}
			for i := 4; i >= 0; i-- {
				raw[5*half+i] = byte(v)
				v >>= 8
			}
		}
	case d.Form == "muid" && d.Width == 16:
		p := strings.Split(text, "-")
		if len(p) != 3 || len(p[0]) != 13 || len(p[1]) != 11 || len(p[2]) != 8 {
			return nil, errors.New("not 13-11-8 hex digits")
		}
		b, err := hex.DecodeString(p[0] + p[1] + p[2])
		if err != nil {
			return nil, err
		}
		return b, nil
	case d.Form == "uuid" && d.Width == 16:
		return parseUUIDText(text)
	case d.Form == "ulid" && d.Width == 16:
		return parseULIDText(text)
	default:
		return nil, errors.New("unknown form for this width")
	}
	return raw, nil
}
