package idcar_test

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"log"
	"syscall"
	"time"

	idcar "github.com/idcar/idcar/clients/go"
)

// The examples that talk to a server run against the lable64 server TestMain starts from
// $IDCAR_BIN; they find it through IDCAR_SOCKET, the client's default, as a program would.
// Their output shows what holds for every ID (the IDs themselves differ on each run).

func ExampleDial() {
	// Without Options.Socket, Dial connects to $IDCAR_SOCKET, else /tmp/idcar.sock. It
	// connects at once (retrying up to Options.RetryDeadline) and asks the server to
	// describe its IDs.
	c, err := idcar.Dial(idcar.Options{})
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()

	d := c.Layout()
	fmt.Println(d.Layout, d.Width, d.Form)
	// Output: lable64 8 hex
}

func ExampleDial_missingSocket() {
	// NoRetry: fail at once instead of waiting for the server to come up.
	_, err := idcar.Dial(idcar.Options{Socket: "/nonexistent/idcar.sock", RetryDeadline: idcar.NoRetry})
	fmt.Println(err)

	var se *idcar.SocketError
	fmt.Println(errors.As(err, &se), se.Op, errors.Is(err, syscall.ENOENT))
	// Output:
	// idcar: cannot connect to /nonexistent/idcar.sock: directory /nonexistent does not exist
	// true connect true
}

func ExampleClient_Next() {
	c, err := idcar.Dial(idcar.Options{})
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()

	id, err := c.Next(context.Background())
	if err != nil {
		log.Fatal(err)
	}
	text := id.String() // as `idcar get` prints it, e.g. 7e3c018045810093
	fields, err := id.Decode()
	if err != nil {
		log.Fatal(err)
	}
	issued := time.UnixMilli(fields["timestamp_ms"].(int64))
	fmt.Println(id.Layout(), len(text), "hex digits")
	fmt.Println("decoded id equals the text:", fields["id"] == text)
	fmt.Println("issued within the last minute:", time.Since(issued) < time.Minute)
	// Output:
	// lable64 16 hex digits
	// decoded id equals the text: true
	// issued within the last minute: true
}

func ExampleClient_IDs() {
	c, err := idcar.Dial(idcar.Options{})
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()

	// Asked for in requests of at most 1,000 IDs: here 1,000 + 1,000 + 500.
	ids, err := c.IDs(context.Background(), 2500)
	if err != nil {
		log.Fatal(err)
	}
	unique := map[string]bool{}
	for _, id := range ids {
		unique[id.String()] = true
	}
	fmt.Println(len(ids), "IDs,", len(unique), "distinct")
	// Output: 2500 IDs, 2500 distinct
}

func ExampleClient_Uint64() {
	c, err := idcar.Dial(idcar.Options{})
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()

	// For the 8-byte layouts (lable64, ugd60, si53); sno80 and muid128 give ErrNotUint64.
	v, err := c.Uint64(context.Background())
	if err != nil {
		log.Fatal(err)
	}
	// The same ID as an ID value: a lable64 ID's text form is the 16 hex digits of v.
	id, err := idcar.FromBytes(c.Layout(), binary.BigEndian.AppendUint64(nil, v))
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(id.String() == fmt.Sprintf("%016x", v))
	// Output: true
}

func ExampleOptions_prefetch() {
	// Keep up to 1,000 IDs in a local buffer, refilled in the background when it falls to
	// 250; IDs that waited longer than MaxAge are dropped, never handed out.
	c, err := idcar.Dial(idcar.Options{Prefetch: 1000, LowWater: 250, MaxAge: time.Second})
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close() // stops the refill and drops the buffer

	ctx := context.Background()
	unique := map[string]bool{}
	for i := 0; i < 3000; i++ {
		id, err := c.Next(ctx) // mostly from the buffer: no round trip
		if err != nil {
			log.Fatal(err)
		}
		unique[id.String()] = true
	}
	fmt.Println(len(unique), "distinct IDs")
	// Output: 3000 distinct IDs
}

func ExampleParse() {
	d, err := idcar.LayoutDescription("lable64")
	if err != nil {
		log.Fatal(err)
	}
	id, err := idcar.Parse(d, "7e3c018045810093")
	if err != nil {
		log.Fatal(err)
	}
	v, _ := id.Uint64()
	fmt.Println(id.Layout(), id, v)
	fmt.Printf("% x\n", id.Bytes())
	// Output:
	// lable64 7e3c018045810093 9096146997815083155
	// 7e 3c 01 80 45 81 00 93
}

func ExampleID_Decode() {
	d, _ := idcar.LayoutDescription("lable64")
	id, err := idcar.Parse(d, "7e3c018045810093")
	if err != nil {
		log.Fatal(err)
	}
	// The keys and values of `idcar decode --json`; integers are int64.
	fields, err := id.Decode()
	if err != nil {
		log.Fatal(err)
	}
	for _, k := range []string{"layout", "id", "timestamp_ms", "sequence", "generator", "cluster", "time"} {
		fmt.Printf("%s: %v\n", k, fields[k])
	}
	// Output:
	// layout: lable64
	// id: 7e3c018045810093
	// timestamp_ms: 1795321511038
	// sequence: 1
	// generator: 9
	// cluster: 3
	// time: 2026-11-22T04:25:11.038Z
}

func ExampleID_Decode_muid128() {
	d, _ := idcar.LayoutDescription("muid128")
	id, err := idcar.Parse(d, "5D5EAC793E61F-1BFC71B112D-0000000B")
	if err != nil {
		log.Fatal(err)
	}
	fields, err := id.Decode()
	if err != nil {
		log.Fatal(err)
	}
	for _, k := range []string{"timestamp", "medallion", "offset", "time"} {
		fmt.Printf("%s: %v\n", k, fields[k])
	}
	// Output:
	// timestamp: 1642579230975519
	// medallion: 1923190821165
	// offset: 11
	// time: 2022-01-19T08:00:30.975519Z
}

func ExampleLayoutDescription() {
	// What a server started with `--layout si53 --mid-bits 3` describes.
	d, err := idcar.LayoutDescription("si53")
	if err != nil {
		log.Fatal(err)
	}
	d.Params["mid-bits"] = "3"
	fmt.Println(d.Layout, d.Width, d.Form)

	id, err := idcar.Parse(d, "1013162")
	if err != nil {
		log.Fatal(err)
	}
	f, _ := id.Decode()
	fmt.Println(f["MAB"], f["MID"], f["UIN"], f["time"])
	// Output:
	// si53 8 dec
	// 123 5 426 2020-01-01T00:00:00.123Z
}

func ExampleFromBytes() {
	// Binary IDs as the server sends them, in each layout's default text form.
	for _, x := range []struct {
		layout string
		raw    []byte
	}{
		{"ugd60", []byte{0x05, 0x55, 0x55, 0x55, 0x5a, 0xaa, 0xab, 0x55}},
		{"sno80", []byte{0, 0, 0, 0, 2, 2, 0, 2, 0, 2}},
	} {
		d, _ := idcar.LayoutDescription(x.layout)
		id, err := idcar.FromBytes(d, x.raw)
		if err != nil {
			log.Fatal(err)
		}
		fmt.Println(x.layout, id)
	}
	// Output:
	// ugd60 qqqqqqqqtV
	// sno80 222222242a226224
}

func ExampleID_UUID() {
	// A uuid7 server's IDs are RFC 9562 version-7 UUIDs; Parse reads one as idcar prints
	// it, as c.Next(ctx) returns it from such a server.
	d, _ := idcar.LayoutDescription("uuid7")
	id, err := idcar.Parse(d, "01a20180-3c7e-74b5-a873-0009a1b2c3ac")
	if err != nil {
		log.Fatal(err)
	}
	u, ok := id.UUID() // ok is false for the IDs of other layouts
	if !ok {
		log.Fatalf("%s is not a uuid7 ID", id.Layout())
	}
	var want idcar.UUID = [16]byte{0x01, 0xa2, 0x01, 0x80, 0x3c, 0x7e, 0x74, 0xb5,
		0xa8, 0x73, 0x00, 0x09, 0xa1, 0xb2, 0xc3, 0xac}
	fmt.Println(u, u == want, u.String() == id.String())

	// Its other text forms.
	d.Form = "ulid"
	ulid, _ := idcar.FromBytes(d, u[:])
	fmt.Println(ulid)
	// Output:
	// 01a20180-3c7e-74b5-a873-0009a1b2c3ac true true
	// 01M80R0F3YEJTTGWR016GV5GXC
}

func ExampleID_Decode_uuid7() {
	d, _ := idcar.LayoutDescription("uuid7")
	for _, text := range []string{
		"01a20180-3c7e-74b5-a873-0009a1b2c3ac", // issued by idcar
		"017f22e2-79b0-7cc3-98c4-dc0c0c07398f", // RFC 9562's example: another generator's
	} {
		id, err := idcar.Parse(d, text)
		if err != nil {
			log.Fatal(err)
		}
		f, err := id.Decode()
		if err != nil {
			log.Fatal(err)
		}
		fmt.Println(f["issuer"], f["unix_ts_ms"], f["time"])
		if f["issuer"] == "idcar" {
			fmt.Println("counter", f["counter"], "cluster", f["cluster"], "slot", f["slot"], "random", f["random"])
		}
	}
	// Output:
	// idcar 1795321511038 2026-11-22T04:25:11.038Z
	// counter 1234567 cluster 3 slot 9 random 10597059
	// other 1645557742000 2022-02-22T19:22:22.000Z
}
