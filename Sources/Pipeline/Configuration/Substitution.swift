import YAML

/// Replaces ${VAR} and ${VAR:-default}; an unset variable without a default is an error.
func substitute(_ text: String, _ node: YAMLNode, _ environment: [String: String], _ file: String)
    throws(PipelineConfigError) -> String
{
    let chars = Array(text)
    guard chars.count > 1 else { return text }
    var out = ""
    var i = 0
    while i < chars.count {
        guard chars[i] == "$", i + 1 < chars.count, chars[i + 1] == "{" else {
            out.append(chars[i])
            i += 1
            continue
        }
        guard let close = chars[(i + 2)...].firstIndex(of: "}") else {
            throw PipelineConfigError(file: file, mark: node.mark, message: "unterminated '${' in '\(text)'")
        }
        let inner = Array(chars[(i + 2)..<close])
        var name = inner[...], fallback: ArraySlice<Character>? = nil
        if let sep = inner.indices.first(where: { $0 + 1 < inner.count && inner[$0] == ":" && inner[$0 + 1] == "-" }) {
            name = inner[..<sep]
            fallback = inner[(sep + 2)...]
        }
        let variable = String(name)
        guard !variable.isEmpty, variable.allSatisfy({ $0.isLetter || $0.isNumber || $0 == "_" }) else {
            throw PipelineConfigError(
                file: file, mark: node.mark, message: "invalid variable name '\(variable)' in '\(text)'")
        }
        if let v = environment[variable], !(v.isEmpty && fallback != nil) {
            out += v
        } else if let fallback {
            out += String(fallback)
        } else {
            throw PipelineConfigError(
                file: file, mark: node.mark,
                message:
                    "environment variable \(variable) is not set and '\(text)' gives no default "
                    + "(${\(variable):-default})"
            )
        }
        i = close + 1
    }
    return out
}
