package idcar

import (
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"math/bits"
	"strconv"
	"time"
)

const (
	ugd60EpochS          = 1519862400
	sno80EpochMS         = 1262304000000
	si53DefaultBaseClock = 1577836800000
	si53DefaultMidBits   = 5
	// uuid7LastMS is the last millisecond RFC 3339 writes (9999-12-31T23:59:59.999Z):
	// decode refuses later uuid7 IDs, as idcar does.
	uuid7LastMS = 253402300799999
	// uuid7CheckK is the multiplier of uuid7's check byte.
	uuid7CheckK = 0x9E3779B97F4A7C15
)

func rfc3339Milli(ms int64) string {
	return time.UnixMilli(ms).UTC().Format("2006-01-02T15:04:05.000Z")
}

func rfc3339Micro(us int64) string {
	return time.UnixMicro(us).UTC().Format("2006-01-02T15:04:05.000000Z")
}

// decode returns the fields of raw as `idcar decode --json` prints them.
func decode(d *Description, raw []byte) (map[string]any, error) {
	if d.Width != len(raw) {
		return nil, fmt.Errorf("%w: %s IDs are %d bytes, got %d", ErrInvalidID, d.Layout, d.Width, len(raw))
	}
	want, known := layoutDefaults[d.Layout]
	if !known {
		return nil, fmt.Errorf("%w: cannot decode IDs of unknown layout %q", ErrInvalidID, d.Layout)
	}
	if want.Width != len(raw) {
		return nil, fmt.Errorf("%w: %s IDs are %d bytes, got %d", ErrInvalidID, d.Layout, want.Width, len(raw))
	}
	switch d.Layout {
	case "lable64":
		u := binary.BigEndian.Uint64(raw)
		if r := (u >> 10) & 63; r != 0 {
			return nil, fmt.Errorf("%w: lable64 reserved bits are %d, not zero", ErrInvalidID, r)
		}
		ms := int64(bits.Reverse64(u &^ (1<<22 - 1)))
		return map[string]any{
			"layout":       "lable64",
			"id":           formatText("hex", raw),
			"timestamp_ms": ms,
			"sequence":     int64((u >> 16) & 63),
			"generator":    int64((u >> 4) & 63),
			"cluster":      int64(u & 15),
			"time":         rfc3339Milli(ms),
		}, nil
	case "ugd60":
		s := binary.BigEndian.Uint64(raw)
		if s>>60 != 0 {
			return nil, fmt.Errorf("%w: ugd60 IDs have 60 bits", ErrInvalidID)
		}
		ts := int64(s >> 28)
		return map[string]any{
			"layout":      "ugd60",
			"id":          formatText("b64", raw),
			"storage_hex": fmt.Sprintf("%015x", s),
			"timestamp_s": ts,
			"worker":      int64((s >> 19) & 511),
			"seq":         int64((s >> 9) & 1023),
			"random":      int64(s & 511),
			"time":        rfc3339Milli((ugd60EpochS + ts) * 1000),
		}, nil
	case "si53":
		v := binary.BigEndian.Uint64(raw)
		if v>>53 != 0 {
			return nil, fmt.Errorf("%w: si53 IDs are below 2^53", ErrInvalidID)
		}
		base, err := intParam(d, "base-clock", si53DefaultBaseClock)
		if err != nil {
			return nil, err
		}
		midBits, err := intParam(d, "mid-bits", si53DefaultMidBits)
		if err != nil {
			return nil, err
		}
		if midBits < 0 || midBits > 13 {
			return nil, fmt.Errorf("%w: si53 mid-bits %d is not 0..13", ErrInvalidID, midBits)
		}
		uinBits := 13 - uint(midBits)
		mab := int64(v >> 13)
		return map[string]any{
			"layout":       "si53",
			"id":           int64(v),
			"MAB":          mab,
			"MID":          int64((v >> uinBits) & (1<<uint(midBits) - 1)),
			"UIN":          int64(v & (1<<uinBits - 1)),
			"base_clock":   base,
			"timestamp_ms": base + mab,
			"time":         rfc3339Milli(base + mab),
		}, nil
	case "sno80":
		head := binary.BigEndian.Uint64(raw[:8])
		units := int64(head >> 25)
		unixMS := sno80EpochMS + units*4
		return map[string]any{
			"layout":              "sno80",
			"id":                  formatText("b32", raw),
			"bytes_hex":           hex.EncodeToString(raw),
			"units":               units,
			"tick":                int64((head >> 24) & 1),
			"meta":                int64((head >> 16) & 255),
			"partition":           int64(head & 65535),
			"partition_bytes_hex": fmt.Sprintf("%04x", head&65535),
			"sequence":            int64(binary.BigEndian.Uint16(raw[8:10])),
			"unix_ms":             unixMS,
			"time":                rfc3339Milli(unixMS),
		}, nil
	case "uuid7":
		return decodeUUID7(raw)
	default: // muid128
		hi := binary.BigEndian.Uint64(raw[:8])
		lo := binary.BigEndian.Uint64(raw[8:])
		ts := int64(hi >> 12)
		return map[string]any{
			"layout":     "muid128",
			"id":         formatText("muid", raw),
			"packed_hex": hex.EncodeToString(raw),
			"timestamp":  ts,
			"medallion":  int64((hi&0xfff)<<32 | lo>>32),
			"offset":     int64(int32(uint32(lo))),
			"time":       rfc3339Micro(ts),
		}, nil
	}
}

// decodeUUID7 returns the fields of a version-7 UUID: the time for any, and the fields
// idcar puts in it when its check byte is idcar's.
func decodeUUID7(raw []byte) (map[string]any, error) {
	if err := uuid7Check(raw); err != nil {
		return nil, fmt.Errorf("%w: %s is not a uuid7 ID: %v", ErrInvalidID, uuidText(raw), err)
	}
	hi, lo := binary.BigEndian.Uint64(raw[:8]), binary.BigEndian.Uint64(raw[8:])
	ms := hi >> 16
	if ms > uuid7LastMS {
		return nil, fmt.Errorf("%w: uuid7 unix_ts_ms %d is after 9999-12-31T23:59:59.999Z, the last time RFC 3339 writes", ErrInvalidID, ms)
	}
	f := map[string]any{
		"layout":     "uuid7",
		"id":         uuidText(raw),
		"hex":        hex.EncodeToString(raw),
		"unix_ts_ms": int64(ms),
		"time":       rfc3339Milli(int64(ms)),
		"issuer":     "other",
	}
	if check := ((hi * uuid7CheckK) ^ (lo >> 8)) * uuid7CheckK >> 56; check == lo&255 {
		f["issuer"] = "idcar"
		f["counter"] = int64((hi&4095)<<10 | (lo>>52)&1023)
		f["cluster"] = int64((lo >> 48) & 15)
		f["slot"] = int64((lo >> 32) & 65535)
		f["random"] = int64((lo >> 8) & 16777215)
	}
	return f, nil
}

// intParam reads an integer parameter of the description, or def when it is absent.
func intParam(d *Description, name string, def int64) (int64, error) {
	s, ok := d.Params[name]
	if !ok {
		return def, nil
	}
	v, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("%w: %s parameter %s=%q is not an integer", ErrInvalidID, d.Layout, name, s)
	}
	return v, nil
}
