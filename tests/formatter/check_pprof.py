"""Parses a `memshim-format --pprof` file with Google's protobuf runtime against pprof's schema
(github.com/google/pprof/proto/profile.proto, package perftools.profiles: the messages and field
numbers below are that file's) and checks what every pprof reader relies on.

usage: check_pprof.py FILE [STAGE=BYTES ...]   exit 0 when valid (and each stage sums to BYTES)
"""
import collections
import gzip
import sys

from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

F = descriptor_pb2.FieldDescriptorProto
# message -> [(name, number, type, repeated, message type)]
SCHEMA = {
    "Profile": [("sample_type", 1, F.TYPE_MESSAGE, True, "ValueType"),
                ("sample", 2, F.TYPE_MESSAGE, True, "Sample"),
                ("mapping", 3, F.TYPE_MESSAGE, True, "Mapping"),
                ("location", 4, F.TYPE_MESSAGE, True, "Location"),
                ("function", 5, F.TYPE_MESSAGE, True, "Function"),
                ("string_table", 6, F.TYPE_STRING, True, None),
                ("drop_frames", 7, F.TYPE_INT64, False, None),
                ("keep_frames", 8, F.TYPE_INT64, False, None),
                ("time_nanos", 9, F.TYPE_INT64, False, None),
                ("duration_nanos", 10, F.TYPE_INT64, False, None),
                ("period_type", 11, F.TYPE_MESSAGE, False, "ValueType"),
                ("period", 12, F.TYPE_INT64, False, None),
                ("comment", 13, F.TYPE_INT64, True, None),
                ("default_sample_type", 14, F.TYPE_INT64, False, None)],
    "ValueType": [("type", 1, F.TYPE_INT64, False, None), ("unit", 2, F.TYPE_INT64, False, None)],
    "Sample": [("location_id", 1, F.TYPE_UINT64, True, None),
               ("value", 2, F.TYPE_INT64, True, None),
               ("label", 3, F.TYPE_MESSAGE, True, "Label")],
    "Label": [("key", 1, F.TYPE_INT64, False, None), ("str", 2, F.TYPE_INT64, False, None),
              ("num", 3, F.TYPE_INT64, False, None), ("num_unit", 4, F.TYPE_INT64, False, None)],
    "Mapping": [("id", 1, F.TYPE_UINT64, False, None), ("memory_start", 2, F.TYPE_UINT64, False, None),
                ("memory_limit", 3, F.TYPE_UINT64, False, None),
                ("file_offset", 4, F.TYPE_UINT64, False, None),
                ("filename", 5, F.TYPE_INT64, False, None), ("build_id", 6, F.TYPE_INT64, False, None)],
    "Location": [("id", 1, F.TYPE_UINT64, False, None), ("mapping_id", 2, F.TYPE_UINT64, False, None),
                 ("address", 3, F.TYPE_UINT64, False, None),
                 ("line", 4, F.TYPE_MESSAGE, True, "Line"), ("is_folded", 5, F.TYPE_BOOL, False, None)],
    "Line": [("function_id", 1, F.TYPE_UINT64, False, None), ("line", 2, F.TYPE_INT64, False, None)],
    "Function": [("id", 1, F.TYPE_UINT64, False, None), ("name", 2, F.TYPE_INT64, False, None),
                 ("system_name", 3, F.TYPE_INT64, False, None),
                 ("filename", 4, F.TYPE_INT64, False, None),
                 ("start_line", 5, F.TYPE_INT64, False, None)],
}


def profile_class():
    fd = descriptor_pb2.FileDescriptorProto(name="profile.proto", package="perftools.profiles",
                                            syntax="proto3")
    for name, fields in SCHEMA.items():
        m = fd.message_type.add(name=name)
        for fname, number, ftype, repeated, sub in fields:
            f = m.field.add(name=fname, number=number, type=ftype,
                            label=F.LABEL_REPEATED if repeated else F.LABEL_OPTIONAL)
            if sub:
                f.type_name = ".perftools.profiles." + sub
    pool = descriptor_pool.DescriptorPool()
    pool.Add(fd)
    return message_factory.GetMessageClass(pool.FindMessageTypeByName("perftools.profiles.Profile"))


def fail(why):
    print("check_pprof: " + why)
    sys.exit(1)


def main():
    with gzip.open(sys.argv[1], "rb") as f:
        p = profile_class()()
        p.ParseFromString(f.read())
    s = p.string_table
    if not s or s[0] != "":
        fail("string_table[0] is not empty")
    types = [(s[t.type], s[t.unit]) for t in p.sample_type]
    if types != [("inuse_space", "bytes"), ("samples", "count")]:
        fail("sample types %r" % types)
    funcs = {fn.id: s[fn.name] for fn in p.function}
    locs = {}
    for loc in p.location:
        if loc.id == 0 or not loc.line or any(ln.function_id not in funcs for ln in loc.line):
            fail("location %d without a known function" % loc.id)
        locs[loc.id] = funcs[loc.line[0].function_id]
    if not p.sample:
        fail("no samples")
    per_stage = collections.Counter()
    for smp in p.sample:
        if len(smp.value) != len(types) or not smp.location_id or smp.value[0] <= 0:
            fail("a sample with values %r, locations %r" % (list(smp.value), list(smp.location_id)))
        if any(i not in locs for i in smp.location_id):
            fail("a sample names an unknown location")
        labels = {s[l.key]: s[l.str] for l in smp.label}
        if set(labels) != {"stage", "process"}:
            fail("labels %r" % labels)
        per_stage[labels["stage"]] += smp.value[0]
    for want in sys.argv[2:]:
        stage, _, total = want.partition("=")
        if per_stage[stage] != int(total):
            fail("stage %s sums to %d bytes, expected %s" % (stage, per_stage[stage], total))
    print("check_pprof: %d samples, %d locations, stages %s" % (
        len(p.sample), len(p.location), ", ".join("%s=%d" % kv for kv in sorted(per_stage.items()))))


main()
