// A Cyclone DDS topic type whose samples are the serialized bytes themselves: ROS 2 CDR as rosbag2
// stores it (the 4-byte encapsulation header, then the XCDR1 body). This is how rmw_cyclonedds
// publishes and takes serialized messages: the type announces only its name, is keyless, and the
// bytes cross without being decoded or re-encoded. Written against the 0.10 sertype interface,
// which is semi-internal and changed in 0.11; the build refuses other series.
#ifndef GYROCOMPASS_DDS_SERIALIZED_TYPE_H
#define GYROCOMPASS_DDS_SERIALIZED_TYPE_H

#include <stdint.h>
#include <dds/dds.h>

struct ddsi_sertype;

/// A keyless topic named `dds_topic_name` ("rt/imu/data") of type `dds_type_name`
/// ("sensor_msgs::msg::dds_::Imu_") carrying serialized bytes. Returns the topic or a negative error;
/// `type_out` receives the type the domain uses for it (owned by the domain), for writing.
dds_entity_t gcdds_create_serialized_topic(
    dds_entity_t participant, const char *dds_topic_name, const char *dds_type_name, const dds_qos_t *qos,
    const struct ddsi_sertype **type_out);

/// Publishes `size` bytes (encapsulation header included) on a writer of a topic of `type`.
dds_return_t gcdds_write_serialized(dds_entity_t writer, const struct ddsi_sertype *type, const void *bytes, uint32_t size);

/// Takes up to `max` samples from a reader of such a topic into `samples` (one serialized sample
/// per entry, to be released with gcdds_release) and `infos`. Returns the count or a negative error.
int32_t gcdds_take_serialized(dds_entity_t reader, struct ddsi_serdata **samples, dds_sample_info_t *infos, uint32_t max);

/// A taken sample's size in bytes and its bytes.
uint32_t gcdds_sample_size(const struct ddsi_serdata *sample);
void gcdds_sample_copy(const struct ddsi_serdata *sample, void *destination, uint32_t size);
void gcdds_release(struct ddsi_serdata *sample);

/// The built-in discovery topics (macros Swift does not import).
dds_entity_t gcdds_builtin_publications(void);
dds_entity_t gcdds_builtin_subscriptions(void);
/// Every sample, view and instance state (a compound macro Swift does not import).
uint32_t gcdds_any_state(void);

#endif
