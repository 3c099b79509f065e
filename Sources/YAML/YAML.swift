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
    /// Reads at most `maximumBytes` + 1 bytes (default: the document limit), so an endless file such
    /// as /dev/zero stops there and `parse` refuses it by its size.
    public static func readFile(_ path: String, maximumBytes: Int = Limits().maximumBytes) -> String? {
        guard let f = fopen(path, "rb") else { return nil }
        defer { fclose(f) }
        var out = [UInt8]()
        var buffer = [UInt8](repeating: 0, count: 65536)
        while out.count <= maximumBytes {
            let n = fread(&buffer, 1, min(buffer.count, maximumBytes + 1 - out.count), f)
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
                message: "the document has more than \(limits.maximumBytes) bytes, the limit")
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

    /// An open sequence or mapping. A class, so appending to the innermost one is done in place
    /// (amortised constant time; a value popped and pushed back would copy its items each time).
    final class Frame {
        let isMapping: Bool
        let mark: YAMLMark
        let anchor: String?
        var items: [YAMLNode] = []
        var entries: [(key: YAMLNode, value: YAMLNode)] = []
        var pendingKey: YAMLNode?
        /// The scalar keys so far, for the duplicate check in constant time.
        var keys: Set<String> = []

        init(isMapping: Bool, mark: YAMLMark, anchor: String?) {
            self.isMapping = isMapping
            self.mark = mark
            self.anchor = anchor
        }
    }

    static func build(_ parser: inout yaml_parser_t, file: String, limits: Limits) throws(YAMLError) -> YAMLNode? {
        var tree = TreeBuilder(file: file, limits: limits)
        while !tree.done {
            var event = yaml_event_t()
            guard yaml_parser_parse(&parser, &event) == 1 else {
                let problem = parser.problem.map { String(cString: $0) } ?? "syntax error"
                let context = parser.context.map { " " + String(cString: $0) } ?? ""
                throw YAMLError(
                    file: file, mark: TreeBuilder.mark(parser.problem_mark),
                    message: "YAML syntax error: \(problem)\(context)")
            }
            defer { yaml_event_delete(&event) }
            try tree.take(event)
        }
        return tree.root
    }

    /// The tree as libyaml's events build it, within the limits: nesting depth, and nodes with every
    /// alias expanded (an alias counts as the nodes of the subtree it names).
    struct TreeBuilder {
        let file: String
        let limits: Limits
        var stack: [Frame] = []
        var anchors: [String: YAMLNode] = [:]
        /// Nodes each anchored subtree stands for, aliases inside it expanded.
        var anchorWeights: [String: Int] = [:]
        /// Expanded nodes so far, and per open collection the count at its start.
        var nodes = 0
        var nodesAtStart: [Int] = []
        var root: YAMLNode?
        var done = false

        init(file: String, limits: Limits) {
            self.file = file
            self.limits = limits
        }

        static func mark(_ m: yaml_mark_t) -> YAMLMark { YAMLMark(line: Int(m.line) + 1, column: Int(m.column) + 1) }

        mutating func count(_ n: Int, at m: YAMLMark) throws(YAMLError) {
            nodes += n
            if nodes > limits.maximumNodes {
                throw YAMLError(
                    file: file, mark: m,
                    message: "the document expands to more than \(limits.maximumNodes) nodes (aliases included)")
            }
        }

        mutating func attach(_ node: YAMLNode) throws(YAMLError) {
            guard let top = stack.last else {
                root = node
                return
            }
            guard top.isMapping else {
                top.items.append(node)
                return
            }
            guard let key = top.pendingKey else {
                top.pendingKey = node
                return
            }
            if let scalar = key.scalar, !top.keys.insert(scalar).inserted {
                throw YAMLError(file: file, mark: key.mark, message: "duplicate key '\(scalar)'")
            }
            top.entries.append((key, node))
            top.pendingKey = nil
        }

        mutating func take(_ event: yaml_event_t) throws(YAMLError) {
            let m = Self.mark(event.start_mark)
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
                let isMapping = event.type == YAML_MAPPING_START_EVENT
                let anchor = isMapping ? event.data.mapping_start.anchor : event.data.sequence_start.anchor
                stack.append(Frame(isMapping: isMapping, mark: m, anchor: anchor.map { String(cString: $0) }))
            case YAML_SEQUENCE_END_EVENT, YAML_MAPPING_END_EVENT:
                guard let top = stack.popLast() else { break }
                let node = YAMLNode(value: top.isMapping ? .mapping(top.entries) : .sequence(top.items), mark: top.mark)
                let anchor = top.anchor
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
            case YAML_DOCUMENT_START_EVENT where root != nil:
                throw YAMLError(
                    file: file, mark: m, message: "a second YAML document: the file must hold exactly one")
            case YAML_STREAM_END_EVENT:
                done = true
            default:
                break
            }
        }
    }
}
