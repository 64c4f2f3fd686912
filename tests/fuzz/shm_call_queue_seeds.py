#!/usr/bin/env python3
"""Writes the seeds of shm_call_queue_fuzz (tests/fuzz/corpus/shm_call_queue/).

Each seed is the queue's head and tail positions (two little-endian u64),
then the ring's record bytes from its start, in the layout of
common/transport/grpc/shm_call_queue.cc: a 72-byte head (bytes, kind,
call id, status, text bytes, wire bytes, has block, block offset / bytes /
seq, value references, lend slot, lend ticket), the text, the inline wire
bytes, 16 bytes per value reference, padded to 8. Run it again when that
layout changes.
"""
import os
import struct
import sys

REQUEST, RESPONSE, PART, PAD = 1, 2, 3, 0


def record(kind, call_id=1, status=0, text=b"", wire=b"", block=None, refs=(), slot=0, ticket=0,
           text_bytes=None, bytes_field=None):
    body = text + wire + b"".join(struct.pack("<QQ", o, n) for o, n in refs)
    size = (72 + len(body) + 7) // 8 * 8
    offset, nbytes, seq = block if block else (0, 0, 0)
    head = struct.pack("<IIQiIIIQQQIIQ", bytes_field if bytes_field is not None else size, kind, call_id, status,
                       len(text) if text_bytes is None else text_bytes, len(wire), 1 if block else 0,
                       offset, nbytes, seq, len(refs), slot, ticket)
    return (head + body).ljust(size, b"\0")


def seed(records, head=None, tail=0):
    ring = b"".join(records)
    return struct.pack("<QQ", len(ring) if head is None else head, tail) + ring


def main(out):
    push = record(REQUEST, text=b"Push", wire=b"\0" + b"x" * 100)
    seeds = {
        "empty": struct.pack("<QQ", 0, 0),
        "request-and-response": seed([record(REQUEST, text=b"Pull", wire=b"\x02hi"),
                                      record(RESPONSE, block=(4096, 70000, 3))]),
        "response-in-parts": seed([record(PART, call_id=5, wire=b"\x03abc" + b"x" * 61),
                                   record(RESPONSE, call_id=5, wire=b"x" * 65)]),
        "error-response": seed([record(RESPONSE, call_id=9, status=13, text=b"shard stopped")]),
        "lent-response": seed([record(RESPONSE, call_id=4, wire=b"\x02hi", refs=[(0, 1 << 20), (1 << 20, 4096)],
                                      slot=3, ticket=7)]),
        "lend-in-a-request": seed([record(REQUEST, text=b"Pull", wire=b"\x02hi", refs=[(0, 64)], slot=1, ticket=1)]),
        "lend-without-ticket": seed([record(RESPONSE, wire=b"\x02hi", refs=[(0, 64)], slot=1, ticket=0)]),
        "lend-beside-a-block": seed([record(RESPONSE, block=(4096, 70000, 3), refs=[(0, 64)], slot=1, ticket=2)]),
        "bad-kind": seed([record(7, text=b"Push", wire=b"\0" + b"x" * 100)]),
        "bad-length": seed([record(REQUEST, text=b"Push", wire=b"\0" + b"x" * 100, bytes_field=len(push) + 3)],
                           head=len(push)),
        "text-too-long": seed([record(REQUEST, text=b"Push", wire=b"\0" + b"x" * 100, text_bytes=99999)]),
        "head-far-ahead": seed([push], head=1 << 40),
        "tail-past-head": seed([push], head=8, tail=64),
        # A pad record must reach the ring's end; this one stops after 64 bytes.
        "pad-short": seed([struct.pack("<II", 64, PAD).ljust(64, b"\0")]),
    }
    for name, data in seeds.items():
        with open(os.path.join(out, name), "wb") as f:
            f.write(data)


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "corpus", "shm_call_queue"))
