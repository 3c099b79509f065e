import CYAML

/// A value to write as YAML.
public indirect enum YAMLValue: Sendable, Equatable {
    case string(String)
    case integer(Int64)
    case sequence([YAMLValue])
    case mapping([(String, YAMLValue)])

    public static func == (a: YAMLValue, b: YAMLValue) -> Bool {
        switch (a, b) {
        case let (.string(x), .string(y)): return x == y
        case let (.integer(x), .integer(y)): return x == y
        case let (.sequence(x), .sequence(y)): return x == y
        case let (.mapping(x), .mapping(y)):
            return x.count == y.count && zip(x, y).allSatisfy { $0.0 == $1.0 && $0.1 == $1.1 }
        default: return false
        }
    }
}

/// Writes YAML with libyaml's emitter (block style, strings quoted where YAML needs it).
public enum YAMLEmitter {
    public struct Failure: Error, CustomStringConvertible {
        public let description: String
    }

    final class Sink { var bytes: [UInt8] = [] }

    public static func emit(_ value: YAMLValue) throws(Failure) -> String {
        var emitter = yaml_emitter_t()
        guard yaml_emitter_initialize(&emitter) == 1 else {
            throw Failure(description: "libyaml emitter could not initialise")
        }
        defer { yaml_emitter_delete(&emitter) }
        let sink = Sink()
        let context = Unmanaged.passUnretained(sink).toOpaque()
        yaml_emitter_set_output(
            &emitter,
            { data, buffer, size in
                let sink = Unmanaged<Sink>.fromOpaque(data!).takeUnretainedValue()
                sink.bytes.append(contentsOf: UnsafeBufferPointer(start: buffer, count: size))
                return 1
            }, context)
        yaml_emitter_set_unicode(&emitter, 1)

        func send(_ fill: (UnsafeMutablePointer<yaml_event_t>) -> Int32) throws(Failure) {
            var event = yaml_event_t()
            guard fill(&event) == 1 else { throw Failure(description: "libyaml could not build an event") }
            guard yaml_emitter_emit(&emitter, &event) == 1 else {
                throw Failure(
                    description: "libyaml emitter: " + (emitter.problem.map { String(cString: $0) } ?? "error"))
            }
        }
        func scalar(_ text: String, plainAllowed: Bool) throws(Failure) {
            var bytes = Array(text.utf8)
            try bytes.withUnsafeMutableBufferPointer { (b) throws(Failure) in
                try send {
                    yaml_scalar_event_initialize(
                        $0, nil, nil, b.baseAddress, Int32(b.count), plainAllowed ? 1 : 0, 1,
                        plainAllowed ? YAML_ANY_SCALAR_STYLE : YAML_DOUBLE_QUOTED_SCALAR_STYLE)
                }
            }
        }
        func node(_ v: YAMLValue) throws(Failure) {
            switch v {
            case .string(let s):
                try scalar(
                    s,
                    plainAllowed: !s.isEmpty && Int64(s) == nil && Double(s) == nil
                        && !["null", "true", "false", "~"].contains(s))
            case .integer(let n): try scalar(String(n), plainAllowed: true)
            case .sequence(let items):
                try send { yaml_sequence_start_event_initialize($0, nil, nil, 1, YAML_BLOCK_SEQUENCE_STYLE) }
                for item in items { try node(item) }
                try send { yaml_sequence_end_event_initialize($0) }
            case .mapping(let entries):
                try send { yaml_mapping_start_event_initialize($0, nil, nil, 1, YAML_BLOCK_MAPPING_STYLE) }
                for (k, v) in entries {
                    try scalar(k, plainAllowed: true)
                    try node(v)
                }
                try send { yaml_mapping_end_event_initialize($0) }
            }
        }
        try send { yaml_stream_start_event_initialize($0, YAML_UTF8_ENCODING) }
        try send { yaml_document_start_event_initialize($0, nil, nil, nil, 1) }
        try node(value)
        try send { yaml_document_end_event_initialize($0, 1) }
        try send { yaml_stream_end_event_initialize($0) }
        guard yaml_emitter_flush(&emitter) == 1 else { throw Failure(description: "libyaml emitter could not flush") }
        return String(decoding: sink.bytes, as: UTF8.self)
    }
}
