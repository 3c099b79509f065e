// A ROS 2 peer on eProsima Fast DDS (Debian's libfastrtps-dev 2.9, the family of ROS 2's default RMW,
// rmw_fastrtps), with no ROS installed: it publishes and takes serialized ROS 2 messages on the ROS 2
// wire conventions (topic rt/<name>, type pkg::msg::dds_::Name_, keyless), as rmw_fastrtps does for
// serialized messages. The interop tests build it with g++ and drive it:
//
//   fastdds_peer SCRIPT COUNT [DOMAIN [RATE]]
//     SCRIPT lines:  sub <ros topic> <ros type>          subscribe (reliable, keep all)
//                    pub <ros topic> <ros type> <hex>    publish these bytes, in file order
//   Waits until every writer and reader matched, publishes (RATE > 0: that many messages of the
//   first published topic per second, as a sensor would), then prints "<topic> <hex>" for every
//   sample taken until each subscription has COUNT samples (or 60 s pass). Exit 0 when all arrived.
#include <fastdds/dds/domain/DomainParticipant.hpp>
#include <fastdds/dds/domain/DomainParticipantFactory.hpp>
#include <fastdds/dds/publisher/DataWriter.hpp>
#include <fastdds/dds/publisher/Publisher.hpp>
#include <fastdds/dds/subscriber/DataReader.hpp>
#include <fastdds/dds/subscriber/SampleInfo.hpp>
#include <fastdds/dds/subscriber/Subscriber.hpp>
#include <fastdds/dds/topic/TopicDataType.hpp>
#include <fastdds/dds/topic/TypeSupport.hpp>
#include <fastdds/rtps/common/SerializedPayload.h>

#include <chrono>
#include <cstring>
#include <fstream>
#include <iostream>
#include <map>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

using namespace eprosima::fastdds::dds;
using eprosima::fastrtps::rtps::SerializedPayload_t;

// The bytes of one serialized message: encapsulation header, then the CDR body.
struct Raw {
    std::vector<unsigned char> bytes;
};

// A type that carries serialized bytes as they are, announced under a ROS 2 DDS type name.
class RawType : public TopicDataType {
public:
    explicit RawType(const std::string &name) {
        setName(name.c_str());
        m_typeSize = 1 << 16;
        m_isGetKeyDefined = false;
    }
    bool serialize(void *data, SerializedPayload_t *payload) override {
        auto *raw = static_cast<Raw *>(data);
        if (raw->bytes.size() < 4 || raw->bytes.size() > payload->max_size) return false;
        std::memcpy(payload->data, raw->bytes.data(), raw->bytes.size());
        payload->length = static_cast<uint32_t>(raw->bytes.size());
        payload->encapsulation = raw->bytes[1] == 1 ? CDR_LE : CDR_BE;
        return true;
    }
    bool deserialize(SerializedPayload_t *payload, void *data) override {
        auto *raw = static_cast<Raw *>(data);
        raw->bytes.assign(payload->data, payload->data + payload->length);
        return true;
    }
    std::function<uint32_t()> getSerializedSizeProvider(void *data) override {
        auto *raw = static_cast<Raw *>(data);
        return [raw]() { return static_cast<uint32_t>(raw->bytes.size()); };
    }
    void *createData() override { return new Raw(); }
    void deleteData(void *data) override { delete static_cast<Raw *>(data); }
    bool getKey(void *, eprosima::fastrtps::rtps::InstanceHandle_t *, bool) override { return false; }
};

static std::string dds_type(const std::string &ros) {  // pkg/msg/Name -> pkg::msg::dds_::Name_
    auto a = ros.find('/'), b = ros.rfind('/');
    return ros.substr(0, a) + "::" + ros.substr(a + 1, b - a - 1) + "::dds_::" + ros.substr(b + 1) + "_";
}

static std::vector<unsigned char> from_hex(const std::string &hex) {
    std::vector<unsigned char> out(hex.size() / 2);
    for (size_t i = 0; i < out.size(); i++) out[i] = static_cast<unsigned char>(std::stoi(hex.substr(2 * i, 2), nullptr, 16));
    return out;
}

static std::string to_hex(const std::vector<unsigned char> &bytes) {
    static const char *digits = "0123456789abcdef";
    std::string out;
    for (auto b : bytes) { out += digits[b >> 4]; out += digits[b & 15]; }
    return out;
}

int main(int argc, char **argv) {
    if (argc < 3) {
        std::cerr << "usage: fastdds_peer SCRIPT COUNT [DOMAIN [RATE]]\n";
        return 2;
    }
    const size_t count = std::stoul(argv[2]);
    const int domain = argc > 3 ? std::stoi(argv[3]) : 0;
    const double rate = argc > 4 ? std::stod(argv[4]) : 0.0;
    auto *participant = DomainParticipantFactory::get_instance()->create_participant(domain, PARTICIPANT_QOS_DEFAULT);
    if (!participant) { std::cerr << "fastdds_peer: cannot create a participant\n"; return 1; }
    auto *publisher = participant->create_publisher(PUBLISHER_QOS_DEFAULT);
    auto *subscriber = participant->create_subscriber(SUBSCRIBER_QOS_DEFAULT);

    DataWriterQos wqos = DATAWRITER_QOS_DEFAULT;
    wqos.reliability().kind = RELIABLE_RELIABILITY_QOS;
    wqos.history().kind = KEEP_ALL_HISTORY_QOS;
    wqos.durability().kind = VOLATILE_DURABILITY_QOS;
    DataReaderQos rqos = DATAREADER_QOS_DEFAULT;
    rqos.reliability().kind = RELIABLE_RELIABILITY_QOS;
    rqos.history().kind = KEEP_ALL_HISTORY_QOS;
    rqos.durability().kind = VOLATILE_DURABILITY_QOS;

    std::map<std::string, Topic *> topics;
    auto topic_for = [&](const std::string &ros, const std::string &type) {
        if (!topics.count(ros)) {
            TypeSupport support(new RawType(dds_type(type)));
            support.register_type(participant);
            topics[ros] = participant->create_topic("rt" + ros, dds_type(type), TOPIC_QOS_DEFAULT);
        }
        return topics[ros];
    };

    std::map<std::string, DataWriter *> writers;
    std::vector<std::pair<std::string, DataReader *>> readers;
    std::vector<std::pair<std::string, std::vector<unsigned char>>> to_publish;
    std::ifstream script(argv[1]);
    std::string line;
    while (std::getline(script, line)) {
        std::istringstream in(line);
        std::string verb, topic, type, hex;
        in >> verb >> topic >> type >> hex;
        if (verb == "sub") {
            readers.emplace_back(topic, subscriber->create_datareader(topic_for(topic, type), rqos));
        } else if (verb == "pub") {
            if (!writers.count(topic)) writers[topic] = publisher->create_datawriter(topic_for(topic, type), wqos);
            to_publish.emplace_back(topic, from_hex(hex));
        }
    }

    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    auto all_matched = [&]() {
        for (auto &w : writers) {
            PublicationMatchedStatus s;
            w.second->get_publication_matched_status(s);
            if (s.current_count == 0) return false;
        }
        for (auto &r : readers) {
            SubscriptionMatchedStatus s;
            r.second->get_subscription_matched_status(s);
            if (s.current_count == 0) return false;
        }
        return true;
    };
    while (!all_matched()) {
        if (std::chrono::steady_clock::now() > deadline) { std::cerr << "fastdds_peer: peers did not match in 20 s\n"; return 1; }
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    // This side matching is not the other side matching: a volatile reader that has not yet matched this
    // writer drops what it sends. Discovery between two implementations was seen to take a few hundred ms
    // idle, and in a CI run a reader matched 1.07 s after this side had (its first 72 samples were lost).
    std::this_thread::sleep_for(std::chrono::milliseconds(3000));

    std::map<std::string, size_t> got;
    auto take_all = [&]() {
        for (auto &r : readers) {
            Raw raw;
            SampleInfo info;
            while (r.second->take_next_sample(&raw, &info) == ReturnCode_t::RETCODE_OK) {
                if (!info.valid_data) continue;
                std::cout << r.first << " " << to_hex(raw.bytes) << "\n";
                got[r.first]++;
            }
        }
    };
    auto next_due = std::chrono::steady_clock::now();
    const auto period = std::chrono::nanoseconds(rate > 0 ? static_cast<long long>(1e9 / rate) : 0);
    for (auto &p : to_publish) {
        if (rate > 0 && p.first == to_publish.front().first) {
            next_due += period;
            std::this_thread::sleep_until(next_due);
        }
        Raw raw{p.second};
        if (!writers[p.first]->write(&raw)) { std::cerr << "fastdds_peer: write failed on " << p.first << "\n"; return 1; }
        take_all();
    }
    std::cerr << "fastdds_peer: published " << to_publish.size() << " message(s)\n";
    deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    auto complete = [&]() {
        for (auto &r : readers) if (got[r.first] < count) return false;
        return true;
    };
    while (!complete() && std::chrono::steady_clock::now() < deadline) {
        take_all();
        std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
    take_all();
    std::cout.flush();
    participant->delete_contained_entities();
    DomainParticipantFactory::get_instance()->delete_participant(participant);
    return complete() ? 0 : 1;
}
