#if canImport(Glibc)
    import Glibc
#endif
import CYAML

/// Where a node starts in its file, 1-based.
public struct YAMLMark: Sendable, Equatable, CustomStringConvertible {
    public var line: Int
    public var column: Int
    public init(line: Int, column: Int) {
        self.line = line
        self.column = column
    }
    public var description: String { "line \(line), column \(column)" }
}

/// A parsed YAML node with its position, so every later error can say where.
public struct YAMLNode: Sendable, Equatable {
    public indirect enum Value: Sendable, Equatable {
        /// A scalar; `plain` is false for quoted and block scalars (which are never null or numbers).
        case scalar(String, plain: Bool)
        case sequence([YAMLNode])
        case mapping([(key: YAMLNode, value: YAMLNode)])

        public static func == (a: Value, b: Value) -> Bool {
            switch (a, b) {
            case let (.scalar(x, p), .scalar(y, q)): return x == y && p == q
            case let (.sequence(x), .sequence(y)): return x == y
            case let (.mapping(x), .mapping(y)):
                return x.count == y.count && zip(x, y).allSatisfy { $0.key == $1.key && $0.value == $1.value }
            default: return false
            }
        }
    }
    public var value: Value
    public var mark: YAMLMark
    public init(value: Value, mark: YAMLMark) {
        self.value = value
        self.mark = mark
    }

    /// The scalar text, if this is a scalar.
    public var scalar: String? { if case .scalar(let s, _) = value { return s } else { return nil } }
    /// True for a plain `null`, `~` or empty scalar.
    public var isNull: Bool {
        if case .scalar(let s, let plain) = value {
            return plain && (s.isEmpty || s == "~" || s == "null" || s == "Null" || s == "NULL")
        }
        return false
    }
    /// Mapping entries, if this is a mapping.
    public var mapping: [(key: YAMLNode, value: YAMLNode)]? {
        if case .mapping(let m) = value { return m } else { return nil }
    }
    /// Sequence items, if this is a sequence.
    public var sequence: [YAMLNode]? { if case .sequence(let s) = value { return s } else { return nil } }
    /// The value for a scalar key in a mapping.
    public subscript(key: String) -> YAMLNode? { mapping?.first { $0.key.scalar == key }?.value }
    /// What kind of node this is, for error messages.
    public var kind: String {
        switch value {
        case .scalar: return isNull ? "null" : "a scalar"
        case .sequence: return "a sequence"
        case .mapping: return "a mapping"
        }
    }
}

/// A YAML syntax or structure error with its file and position.
public struct YAMLError: Error, Sendable, Equatable, CustomStringConvertible {
    public var file: String
    public var mark: YAMLMark
    public var message: String
    public init(file: String, mark: YAMLMark, message: String) {
        self.file = file
        self.mark = mark
        self.message = message
    }
    public var description: String { "\(file):\(mark.line):\(mark.column): \(message)" }
}

/// libyaml's event parser turned into `YAMLNode`s. Anchors and aliases are resolved; merge keys are not.
public enum YAMLParser {
    /// A whole text file (UTF-8), or nil when it cannot be read (`errno` says why).
    public static func readFile(_ path: String) -> String? {
        guard let f = fopen(path, "rb") else { return nil }
        defer { fclose(f) }
        var out = [UInt8]()
        var buffer = [UInt8](repeating: 0, count: 65536)
        while true {
            let n = fread(&buffer, 1, buffer.count, f)
            if n <= 0 { break }
            out.append(contentsOf: buffer[0..<n])
        }
        return String(decoding: out, as: UTF8.self)
    }

    /// Bounds on what a document may make the loader do: a hostile or runaway file gets a clear error
    /// instead of exhausting memory or time.
    public struct Limits: Sendable {
        /// Bytes of text. Default 4 MiB (pipeline files are a few KiB).
        public var maximumBytes = 4 << 20
        /// Nested sequences and mappings. Default 64.
        public var maximumDepth = 64
        /// Nodes in the tree with every alias expanded (the "billion laughs" document). Default 100,000.
        public var maximumNodes = 100_000
        public init() {}
    }

    /// Parses the first document of `text`; nil for an empty stream. `file` names the source in errors.
    public static func parse(_ text: String, file: String, limits: Limits = Limits()) throws(YAMLError) -> YAMLNode? {
        guard text.utf8.count <= limits.maximumBytes else {
            throw YAMLError(
                file: file, mark: YAMLMark(line: 1, column: 1),
                message: "the document has \(text.utf8.count) bytes, more than the limit of \(limits.maximumBytes)")
        }
        var parser = yaml_parser_t()
        guard yaml_parser_initialize(&parser) == 1 else {
            throw YAMLError(file: file, mark: YAMLMark(line: 1, column: 1), message: "libyaml could not initialise")
        }
        defer { yaml_parser_delete(&parser) }
        var bytes = Array(text.utf8)
        return try bytes.withUnsafeMutableBufferPointer { (buffer) throws(YAMLError) -> YAMLNode? in
            yaml_parser_set_input_string(&parser, buffer.baseAddress, buffer.count)
            return try build(&parser, file: file, limits: limits)
        }
    }

    enum Frame {
        case sequence([YAMLNode], YAMLMark, anchor: String?)
        case mapping([(key: YAMLNode, value: YAMLNode)], pendingKey: YAMLNode?, YAMLMark, anchor: String?)
    }

    static func build(_ parser: inout yaml_parser_t, file: String, limits: Limits) throws(YAMLError) -> YAMLNode? {
        var stack: [Frame] = []
        var anchors: [String: YAMLNode] = [:]
        /// Nodes each anchored subtree stands for, aliases inside it expanded.
        var anchorWeights: [String: Int] = [:]
        /// Expanded nodes so far, and per open collection the count at its start.
        var nodes = 0
        var nodesAtStart: [Int] = []
        func count(_ n: Int, at m: YAMLMark) throws(YAMLError) {
            nodes += n
            if nodes > limits.maximumNodes {
                throw YAMLError(
                    file: file, mark: m,
                    message: "the document expands to more than \(limits.maximumNodes) nodes (aliases included)")
            }
        }
        var root: YAMLNode?
        var done = false
        func mark(_ m: yaml_mark_t) -> YAMLMark { YAMLMark(line: Int(m.line) + 1, column: Int(m.column) + 1) }

        func attach(_ node: YAMLNode) throws(YAMLError) {
            guard let top = stack.popLast() else {
                root = node
                return
            }
            switch top {
            case .sequence(var items, let m, let a):
                items.append(node)
                stack.append(.sequence(items, m, anchor: a))
            case .mapping(var entries, let key, let m, let a):
                if let key {
                    if entries.contains(where: { $0.key.scalar != nil && $0.key.scalar == key.scalar }) {
                        throw YAMLError(file: file, mark: key.mark, message: "duplicate key '\(key.scalar ?? "")'")
                    }
                    entries.append((key, node))
                    stack.append(.mapping(entries, pendingKey: nil, m, anchor: a))
                } else {
                    stack.append(.mapping(entries, pendingKey: node, m, anchor: a))
                }
            }
        }

        while !done {
            var event = yaml_event_t()
            guard yaml_parser_parse(&parser, &event) == 1 else {
                let problem = parser.problem.map { String(cString: $0) } ?? "syntax error"
                let context = parser.context.map { " " + String(cString: $0) } ?? ""
                throw YAMLError(
                    file: file, mark: mark(parser.problem_mark), message: "YAML syntax error: \(problem)\(context)")
            }
            defer { yaml_event_delete(&event) }
            let m = mark(event.start_mark)
            switch event.type {
            case YAML_SCALAR_EVENT:
                let s = event.data.scalar
                let text = String(decoding: UnsafeBufferPointer(start: s.value, count: s.length), as: UTF8.self)
                let node = YAMLNode(value: .scalar(text, plain: s.style == YAML_PLAIN_SCALAR_STYLE), mark: m)
                try count(1, at: m)
                if let a = s.anchor {
                    anchors[String(cString: a)] = node
                    anchorWeights[String(cString: a)] = 1
                }
                try attach(node)
            case YAML_SEQUENCE_START_EVENT, YAML_MAPPING_START_EVENT:
                guard stack.count < limits.maximumDepth else {
                    throw YAMLError(file: file, mark: m, message: "nesting deeper than \(limits.maximumDepth) levels")
                }
                try count(1, at: m)
                nodesAtStart.append(nodes)
                if event.type == YAML_SEQUENCE_START_EVENT {
                    stack.append(.sequence([], m, anchor: event.data.sequence_start.anchor.map { String(cString: $0) }))
                    break
                }
                stack.append(
                    .mapping(
                        [], pendingKey: nil, m, anchor: event.data.mapping_start.anchor.map { String(cString: $0) }))
            case YAML_SEQUENCE_END_EVENT, YAML_MAPPING_END_EVENT:
                guard let top = stack.popLast() else { break }
                let node: YAMLNode
                let anchor: String?
                switch top {
                case .sequence(let items, let sm, let a):
                    node = YAMLNode(value: .sequence(items), mark: sm)
                    anchor = a
                case .mapping(let entries, _, let mm, let a):
                    node = YAMLNode(value: .mapping(entries), mark: mm)
                    anchor = a
                }
                let weight = 1 + nodes - (nodesAtStart.popLast() ?? nodes)
                if let anchor {
                    anchors[anchor] = node
                    anchorWeights[anchor] = weight
                }
                try attach(node)
            case YAML_ALIAS_EVENT:
                let name = String(cString: event.data.alias.anchor)
                guard let node = anchors[name] else {
                    throw YAMLError(file: file, mark: m, message: "unknown alias '*\(name)'")
                }
                try count(anchorWeights[name] ?? 1, at: m)
                try attach(node)
            case YAML_DOCUMENT_END_EVENT, YAML_STREAM_END_EVENT:
                done = true
            default:
                break
            }
        }
        return root
    }
}
