// bbolt for the peer comparison, built as a C archive that the Rust crate links (see
// build.rs): each call does a whole operation (a transaction, a read of many keys, a
// range, a replayed script) inside Go, so one crossing between the two runtimes is spread
// over the operation's work.
package main

/*
#include <stdint.h>
#include <stddef.h>
#include <stdlib.h>

// One change of a write: a value to store under a key, or (remove != 0) a key to remove.
typedef struct {
	const uint8_t *key;
	size_t key_len;
	const uint8_t *value;
	size_t value_len;
	int remove;
} cairn_change;

// One operation of a replayed script: kind 0 writes changes[0..count) in one
// transaction, kind 1 reads key in a read transaction of its own, kind 2 reads up to
// count entries from key.
typedef struct {
	int kind;
	const uint8_t *key;
	size_t key_len;
	const cairn_change *changes;
	size_t count;
} cairn_op;
*/
import "C"

import (
	"errors"
	"sync"
	"time"
	"unsafe"

	bolt "go.etcd.io/bbolt"
)

func main() {}

var bucket = []byte("t")

var (
	mu    sync.RWMutex
	dbs   = map[uint64]*bolt.DB{}
	nextH uint64
)

func db(h C.uint64_t) (*bolt.DB, error) {
	mu.RLock()
	defer mu.RUnlock()
	d, ok := dbs[uint64(h)]
	if !ok {
		return nil, errors.New("no such bbolt handle")
	}
	return d, nil
}

// fail turns err into a C string the caller frees with cairn_bbolt_free, or nil.
func fail(err error) *C.char {
	if err == nil {
		return nil
	}
	return C.CString(err.Error())
}

// bytes views C memory as a Go slice without copying; the caller keeps it alive for the
// call, and every transaction that uses it ends before the call returns.
func bytes(p *C.uint8_t, n C.size_t) []byte {
	if n == 0 {
		return []byte{}
	}
	return unsafe.Slice((*byte)(unsafe.Pointer(p)), int(n))
}

//export cairn_bbolt_free
func cairn_bbolt_free(s *C.char) {
	C.free(unsafe.Pointer(s))
}

// cairn_bbolt_open creates a database at path with the bucket "t", in bbolt's default
// options (every commit synced).
//
//export cairn_bbolt_open
func cairn_bbolt_open(path *C.char, handle *C.uint64_t) *C.char {
	d, err := bolt.Open(C.GoString(path), 0o600, nil)
	if err != nil {
		return fail(err)
	}
	err = d.Update(func(tx *bolt.Tx) error {
		_, err := tx.CreateBucketIfNotExists(bucket)
		return err
	})
	if err != nil {
		d.Close()
		return fail(err)
	}
	mu.Lock()
	nextH++
	dbs[nextH] = d
	*handle = C.uint64_t(nextH)
	mu.Unlock()
	return nil
}

//export cairn_bbolt_close
func cairn_bbolt_close(h C.uint64_t) *C.char {
	mu.Lock()
	d, ok := dbs[uint64(h)]
	delete(dbs, uint64(h))
	mu.Unlock()
	if !ok {
		return nil
	}
	return fail(d.Close())
}

func write(d *bolt.DB, changes []C.cairn_change, durable bool) error {
	// bbolt has no per-transaction durability: NoSync is the database's, read by the
	// writer at commit, and only the writer (one at a time) sets it.
	return d.Update(func(tx *bolt.Tx) error {
		d.NoSync = !durable
		b := tx.Bucket(bucket)
		for i := range changes {
			c := &changes[i]
			k := bytes(c.key, c.key_len)
			var err error
			if c.remove != 0 {
				err = b.Delete(k)
			} else {
				err = b.Put(k, bytes(c.value, c.value_len))
			}
			if err != nil {
				return err
			}
		}
		return nil
	})
}

//export cairn_bbolt_write
func cairn_bbolt_write(h C.uint64_t, changes *C.cairn_change, n C.size_t, durable C.int) *C.char {
	d, err := db(h)
	if err != nil {
		return fail(err)
	}
	return fail(write(d, unsafe.Slice(changes, int(n)), durable != 0))
}

// cairn_bbolt_read reads n keys of 8 bytes each, laid end to end at keys, in one read
// transaction; out gets the bytes of the values found.
//
//export cairn_bbolt_read
func cairn_bbolt_read(h C.uint64_t, keys *C.uint8_t, n C.size_t, out *C.size_t) *C.char {
	d, err := db(h)
	if err != nil {
		return fail(err)
	}
	all := bytes(keys, n*8)
	var total int
	err = d.View(func(tx *bolt.Tx) error {
		b := tx.Bucket(bucket)
		for i := 0; i < len(all); i += 8 {
			total += len(b.Get(all[i : i+8]))
		}
		return nil
	})
	*out = C.size_t(total)
	return fail(err)
}

func get(d *bolt.DB, key []byte) (int, error) {
	var n int
	err := d.View(func(tx *bolt.Tx) error {
		n = len(tx.Bucket(bucket).Get(key))
		return nil
	})
	return n, err
}

//export cairn_bbolt_get
func cairn_bbolt_get(h C.uint64_t, key *C.uint8_t, n C.size_t, out *C.size_t) *C.char {
	d, err := db(h)
	if err != nil {
		return fail(err)
	}
	got, err := get(d, bytes(key, n))
	*out = C.size_t(got)
	return fail(err)
}

func scan(d *bolt.DB, start []byte, limit int) (int, error) {
	var n int
	err := d.View(func(tx *bolt.Tx) error {
		c := tx.Bucket(bucket).Cursor()
		var k []byte
		if len(start) == 0 {
			k, _ = c.First()
		} else {
			k, _ = c.Seek(start)
		}
		for ; k != nil && n < limit; k, _ = c.Next() {
			n++
		}
		return nil
	})
	return n, err
}

// cairn_bbolt_range reads up to limit entries from start in key order; out gets how many.
//
//export cairn_bbolt_range
func cairn_bbolt_range(h C.uint64_t, start *C.uint8_t, n C.size_t, limit C.size_t, out *C.size_t) *C.char {
	d, err := db(h)
	if err != nil {
		return fail(err)
	}
	lim := int(^uint(0) >> 1)
	if uint64(limit) < uint64(lim) {
		lim = int(limit)
	}
	got, err := scan(d, bytes(start, n), lim)
	*out = C.size_t(got)
	return fail(err)
}

// cairn_bbolt_replay runs a script's operations in order; secs gets the time they took.
//
//export cairn_bbolt_replay
func cairn_bbolt_replay(h C.uint64_t, ops *C.cairn_op, n C.size_t, durable C.int, secs *C.double) *C.char {
	d, err := db(h)
	if err != nil {
		return fail(err)
	}
	start := time.Now()
	for _, op := range unsafe.Slice(ops, int(n)) {
		key := bytes(op.key, op.key_len)
		switch op.kind {
		case 0:
			err = write(d, unsafe.Slice(op.changes, int(op.count)), durable != 0)
		case 1:
			_, err = get(d, key)
		default:
			_, err = scan(d, key, int(op.count))
		}
		if err != nil {
			return fail(err)
		}
	}
	*secs = C.double(time.Since(start).Seconds())
	return nil
}
