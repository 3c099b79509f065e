// The serialized-bytes topic type (see include/dds_serialized_type.h). dds/dds.h comes first: the
// DDS_HAS_* features it pulls in change the layout of the ddsi structures below.
#include "dds_serialized_type.h"

#include <stdlib.h>
#include <string.h>
#include <stdio.h>

#include <dds/version.h>
#include <dds/ddsi/ddsi_sertype.h>
#include <dds/ddsi/ddsi_serdata.h>
#include <dds/ddsi/q_radmin.h>

#if DDS_VERSION_MAJOR != 0 || DDS_VERSION_MINOR != 10
#error "the serialized topic type is written against the Cyclone DDS 0.10 sertype interface"
#endif

/// One sample: the bytes as they travel, encapsulation header first. A key-only sample (keyless
/// topics still make them for disposes and instance look-ups) has no bytes.
struct serialized_sample {
    struct ddsi_serdata common;
    uint32_t size;
    unsigned char *bytes;
};

/// What the (unused) application-sample entry points read and write: a view of bytes.
struct serialized_view {
    uint32_t size;
    const unsigned char *bytes;
};

static const struct ddsi_serdata_ops serialized_sample_ops;

static struct serialized_sample *new_sample(const struct ddsi_sertype *type, enum ddsi_serdata_kind kind, size_t size) {
    struct serialized_sample *s = calloc(1, sizeof *s);
    if (s == NULL) return NULL;
    ddsi_serdata_init(&s->common, type, kind);
    if (kind == SDK_DATA && size > 0) {
        s->bytes = malloc(size);
        if (s->bytes == NULL) {
            free(s);
            return NULL;
        }
        s->size = (uint32_t)size;
    }
    return s;
}

static uint32_t sample_get_size(const struct ddsi_serdata *d) {
    return ((const struct serialized_sample *)d)->size;
}

static void sample_free(struct ddsi_serdata *d) {
    struct serialized_sample *s = (struct serialized_sample *)d;
    free(s->bytes);
    free(s);
}

// From the network: the fragments of one sample, which may overlap; each adds only what lies past
// the bytes already copied.
static struct ddsi_serdata *sample_from_ser(
    const struct ddsi_sertype *type, enum ddsi_serdata_kind kind, const struct nn_rdata *fragchain, size_t size) {
    struct serialized_sample *s = new_sample(type, kind, size);
    if (s == NULL) return NULL;
    if (kind != SDK_DATA) return &s->common;
    uint32_t off = 0;
    while (fragchain != NULL) {
        if (fragchain->maxp1 > off) {
            const unsigned char *payload = NN_RMSG_PAYLOADOFF(fragchain->rmsg, NN_RDATA_PAYLOAD_OFF(fragchain));
            uint32_t end = fragchain->maxp1 < size ? fragchain->maxp1 : (uint32_t)size;
            if (end > off) memcpy(s->bytes + off, payload + off - fragchain->min, end - off);
            off = fragchain->maxp1;
        }
        fragchain = fragchain->nextfrag;
    }
    return &s->common;
}

static struct ddsi_serdata *sample_from_ser_iov(
    const struct ddsi_sertype *type, enum ddsi_serdata_kind kind, ddsrt_msg_iovlen_t niov, const ddsrt_iovec_t *iov,
    size_t size) {
    struct serialized_sample *s = new_sample(type, kind, size);
    if (s == NULL) return NULL;
    if (kind != SDK_DATA) return &s->common;
    size_t off = 0;
    for (ddsrt_msg_iovlen_t i = 0; i < niov && off < size; i++) {
        size_t n = iov[i].iov_len < size - off ? iov[i].iov_len : size - off;
        memcpy(s->bytes + off, iov[i].iov_base, n);
        off += n;
    }
    return &s->common;
}

static struct ddsi_serdata *sample_from_keyhash(const struct ddsi_sertype *type, const struct ddsi_keyhash *keyhash) {
    (void)keyhash;
    struct serialized_sample *s = new_sample(type, SDK_KEY, 0);
    return s ? &s->common : NULL;
}

static struct ddsi_serdata *sample_from_sample(
    const struct ddsi_sertype *type, enum ddsi_serdata_kind kind, const void *sample) {
    const struct serialized_view *view = sample;
    struct serialized_sample *s = new_sample(type, kind, kind == SDK_DATA ? view->size : 0);
    if (s == NULL) return NULL;
    if (kind == SDK_DATA && view->size > 0) memcpy(s->bytes, view->bytes, view->size);
    return &s->common;
}

static void sample_to_ser(const struct ddsi_serdata *d, size_t off, size_t sz, void *buf) {
    const struct serialized_sample *s = (const struct serialized_sample *)d;
    // The protocol may ask for up to 3 bytes of padding past the end; those are undefined: zero them.
    size_t have = off < s->size ? s->size - off : 0;
    size_t n = sz < have ? sz : have;
    if (n > 0) memcpy(buf, s->bytes + off, n);
    if (sz > n) memset((unsigned char *)buf + n, 0, sz - n);
}

static struct ddsi_serdata *sample_to_ser_ref(const struct ddsi_serdata *d, size_t off, size_t sz, ddsrt_iovec_t *ref) {
    const struct serialized_sample *s = (const struct serialized_sample *)d;
    ref->iov_base = s->bytes + off;
    ref->iov_len = (ddsrt_iov_len_t)sz;
    return ddsi_serdata_ref(d);
}

static void sample_to_ser_unref(struct ddsi_serdata *d, const ddsrt_iovec_t *ref) {
    (void)ref;
    ddsi_serdata_unref(d);
}

static bool sample_to_sample(const struct ddsi_serdata *d, void *sample, void **bufptr, void *buflim) {
    (void)bufptr;
    (void)buflim;
    const struct serialized_sample *s = (const struct serialized_sample *)d;
    struct serialized_view *view = sample;
    view->size = s->size;
    view->bytes = s->bytes;
    return true;
}

// Keyless: every sample is the one instance, so the untyped (key-only) form carries nothing.
static struct ddsi_serdata *sample_to_untyped(const struct ddsi_serdata *d) {
    struct serialized_sample *s = new_sample(d->type, SDK_KEY, 0);
    if (s == NULL) return NULL;
    s->common.type = NULL;
    return &s->common;
}

static bool sample_untyped_to_sample(
    const struct ddsi_sertype *type, const struct ddsi_serdata *d, void *sample, void **bufptr, void *buflim) {
    (void)type;
    (void)d;
    (void)bufptr;
    (void)buflim;
    struct serialized_view *view = sample;
    view->size = 0;
    view->bytes = NULL;
    return true;
}

static bool sample_eqkey(const struct ddsi_serdata *a, const struct ddsi_serdata *b) {
    (void)a;
    (void)b;
    return true;
}

static size_t sample_print(const struct ddsi_sertype *type, const struct ddsi_serdata *d, char *buf, size_t size) {
    (void)type;
    return (size_t)snprintf(buf, size, "%u serialized bytes", (unsigned)((const struct serialized_sample *)d)->size);
}

static void sample_get_keyhash(const struct ddsi_serdata *d, struct ddsi_keyhash *buf, bool force_md5) {
    (void)d;
    (void)force_md5;
    memset(buf, 0, sizeof *buf);
}

static const struct ddsi_serdata_ops serialized_sample_ops = {
    .eqkey = sample_eqkey,
    .get_size = sample_get_size,
    .from_ser = sample_from_ser,
    .from_ser_iov = sample_from_ser_iov,
    .from_keyhash = sample_from_keyhash,
    .from_sample = sample_from_sample,
    .to_ser = sample_to_ser,
    .to_ser_ref = sample_to_ser_ref,
    .to_ser_unref = sample_to_ser_unref,
    .to_sample = sample_to_sample,
    .to_untyped = sample_to_untyped,
    .untyped_to_sample = sample_untyped_to_sample,
    .free = sample_free,
    .print = sample_print,
    .get_keyhash = sample_get_keyhash,
};

static void type_free(struct ddsi_sertype *t) {
    ddsi_sertype_fini(t);
    free(t);
}

// Application samples are views that own nothing (only take through the CDR entry points is used).
static void type_zero_samples(const struct ddsi_sertype *t, void *samples, size_t count) {
    (void)t;
    memset(samples, 0, count * sizeof(struct serialized_view));
}

static void type_realloc_samples(void **ptrs, const struct ddsi_sertype *t, void *old, size_t oldcount, size_t count) {
    (void)t;
    struct serialized_view *grown = realloc(old, count * sizeof *grown);
    if (grown != NULL && count > oldcount) memset(grown + oldcount, 0, (count - oldcount) * sizeof *grown);
    for (size_t i = 0; i < count; i++) ptrs[i] = grown ? grown + i : NULL;
}

static void type_free_samples(const struct ddsi_sertype *t, void **ptrs, size_t count, dds_free_op_t op) {
    (void)t;
    (void)count;
    if ((op & DDS_FREE_ALL_BIT) && ptrs != NULL) free(ptrs[0]);
}

// Same name and same operations: the same type.
static bool type_equal(const struct ddsi_sertype *a, const struct ddsi_sertype *b) {
    (void)a;
    (void)b;
    return true;
}

static uint32_t type_hash(const struct ddsi_sertype *t) {
    (void)t;
    return 0x67636464u;
}

static size_t type_serialized_size(const struct ddsi_sertype *t, const void *sample) {
    (void)t;
    return ((const struct serialized_view *)sample)->size;
}

static bool type_serialize_into(const struct ddsi_sertype *t, const void *sample, void *dst, size_t dst_size) {
    (void)t;
    const struct serialized_view *view = sample;
    if (view->size > dst_size) return false;
    memcpy(dst, view->bytes, view->size);
    return true;
}

static const struct ddsi_sertype_ops serialized_type_ops = {
    .version = ddsi_sertype_v0,
    .arg = NULL,
    .free = type_free,
    .zero_samples = type_zero_samples,
    .realloc_samples = type_realloc_samples,
    .free_samples = type_free_samples,
    .equal = type_equal,
    .hash = type_hash,
    .type_id = NULL,
    .type_map = NULL,
    .type_info = NULL,
    .derive_sertype = NULL,
    .get_serialized_size = type_serialized_size,
    .serialize_into = type_serialize_into,
};

dds_entity_t gcdds_create_serialized_topic(
    dds_entity_t participant, const char *dds_topic_name, const char *dds_type_name, const dds_qos_t *qos,
    const struct ddsi_sertype **type_out) {
    struct ddsi_sertype *t = calloc(1, sizeof *t);
    if (t == NULL) return DDS_RETCODE_OUT_OF_RESOURCES;
    ddsi_sertype_init_flags(t, dds_type_name, &serialized_type_ops, &serialized_sample_ops,
                            DDSI_SERTYPE_FLAG_TOPICKIND_NO_KEY);
    t->allowed_data_representation = DDS_DATA_REPRESENTATION_FLAG_XCDR1;
    struct ddsi_sertype *registered = t;
    dds_entity_t topic = dds_create_topic_sertype(participant, dds_topic_name, &registered, qos, NULL, NULL);
    // On success the domain owns the type (and may hand back an equal one it already had, in
    // `registered`); on failure it is still ours, as rmw_cyclonedds handles it.
    if (topic < 0) type_free(t);
    else if (type_out != NULL) *type_out = registered;
    return topic;
}

dds_return_t gcdds_write_serialized(dds_entity_t writer, const struct ddsi_sertype *type, const void *bytes, uint32_t size) {
    ddsrt_iovec_t iov = {.iov_base = (void *)bytes, .iov_len = (ddsrt_iov_len_t)size};
    struct ddsi_serdata *d = sample_from_ser_iov(type, SDK_DATA, 1, &iov, size);
    if (d == NULL) return DDS_RETCODE_OUT_OF_RESOURCES;
    return dds_writecdr(writer, d);  // takes over the reference
}

int32_t gcdds_take_serialized(dds_entity_t reader, struct ddsi_serdata **samples, dds_sample_info_t *infos, uint32_t max) {
    return dds_takecdr(reader, samples, max, infos, DDS_ANY_STATE);
}

uint32_t gcdds_sample_size(const struct ddsi_serdata *sample) { return ddsi_serdata_size(sample); }

void gcdds_sample_copy(const struct ddsi_serdata *sample, void *destination, uint32_t size) {
    ddsi_serdata_to_ser(sample, 0, size, destination);
}

void gcdds_release(struct ddsi_serdata *sample) { ddsi_serdata_unref(sample); }

dds_entity_t gcdds_builtin_publications(void) { return DDS_BUILTIN_TOPIC_DCPSPUBLICATION; }
dds_entity_t gcdds_builtin_subscriptions(void) { return DDS_BUILTIN_TOPIC_DCPSSUBSCRIPTION; }
uint32_t gcdds_any_state(void) { return DDS_ANY_STATE; }
