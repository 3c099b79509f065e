import Pipeline

/// `fusion-node completion bash|zsh`: a completion script that knows the commands, their options and
/// the stage types, generated from the same tables as the help.
enum CompletionCommand {
    static let help = CommandHelp(
        path: "completion", summary: "Print a shell completion script (bash or zsh).", positionals: "bash|zsh",
        details: "bash: source <(fusion-node completion bash)   zsh: source <(fusion-node completion zsh)",
        examples: ["fusion-node completion bash > ~/.local/share/bash-completion/completions/fusion-node"])

    static func run(_ args: [String]) throws -> ExitCode {
        let a = try Arguments(args, help)
        try a.requirePositionals(1...1)
        switch a.positionals[0] {
        case "bash": print(bash)
        case "zsh": print(zsh)
        default:
            throw UsageError(
                message:
                    "completion for '\(a.positionals[0])' is not available (bash or "
                    + "zsh)\(didYouMean(a.positionals[0], in: ["bash", "zsh"]))",
                command: "completion")
        }
        return .complete
    }

    /// The bash function through zsh's bashcompinit, usable both ways: sourced (`source <(...)`), or
    /// installed as `_fusion-node` in $fpath, where zsh autoloads the file as the completion function
    /// on first use and it must also answer that first request.
    static var zsh: String {
        """
        #compdef fusion-node
        (( $+functions[compdef] )) || { autoload -U compinit && compinit }
        autoload -U +X bashcompinit && bashcompinit
        \(bash)
        if [[ ${funcstack[1]-} == _fusion-node ]]; then _bash_complete -F _fusion_node "$@"; fi
        """
    }

    /// A bash function: commands first, then the options of the command typed so far; after
    /// `stages`, the stage types; file names where a value is a path.
    static var bash: String {
        func words(_ help: CommandHelp) -> String { (help.options.map(\.name) + ["--help"]).joined(separator: " ") }
        var cases = ""
        // `stages` completes stage types (its own case below), not only its options.
        for help in Commands.all where !help.path.isEmpty && !help.path.hasPrefix("-") && help.path != "stages" {
            cases += "    \"\(help.path)\") opts=\"\(words(help))\" ;;\n"
        }
        let top = Commands.topLevel.map(\.name).joined(separator: " ")
        let topFlags = "--config --version --print-default-pipeline --print-man-page"
        let groupTest = Commands.groups.keys.sorted().map { "[ \"$path\" = \($0) ]" }.joined(separator: " || ")
        let groupCases = Commands.groups.map {
            let subcommands = $0.value.map { $0.path.split(separator: " ").last! }.joined(separator: " ")
            return "    \"\($0.key)\") opts=\"\(subcommands)\" ;;\n"
        }
        .sorted().joined()
        return """
            _fusion_node() {
              local cur="${COMP_WORDS[COMP_CWORD]}" prev="${COMP_WORDS[COMP_CWORD-1]}" path="" opts=""
              local w
              for w in "${COMP_WORDS[@]:1:$((COMP_CWORD - 1))}"; do
                case "$w" in
                  -*) ;;
                  *) if [ -z "$path" ]; then path="$w"
                     elif \(groupTest); then path="$path $w"; fi ;;
                esac
              done
              case "$prev" in
                --config|--csv|--accuracy-csv|--record|--print-config) COMPREPLY=($(compgen -f -- "$cur")); return ;;
                --filter) COMPREPLY=($(compgen -W "kalman complementary" -- "$cur")); return ;;
              esac
              case " ${COMP_WORDS[*]} " in *" --config "*) path="--config" ;; esac
              if [ "$path" = "--config" ]; then
                COMPREPLY=($(compgen -W "\(words(PipelineCommand.help))" -- "$cur"))
                [ ${#COMPREPLY[@]} -eq 0 ] && COMPREPLY=($(compgen -f -- "$cur"))
                return
              fi
              if [ -z "$path" ]; then
                COMPREPLY=($(compgen -W "\(top) \(words(DefaultPipelineCommand.help)) \(topFlags)" -- "$cur"))
                [ "${cur#-}" = "$cur" ] || return
                return
              fi
              case "$path" in
            \(groupCases)\(cases)    "stages") opts="\(StageType.allCases.map(\.name).joined(separator: " ")) --help" ;;
                "help") opts="\(top)" ;;
              esac
              COMPREPLY=($(compgen -W "$opts" -- "$cur"))
              [ ${#COMPREPLY[@]} -eq 0 ] && COMPREPLY=($(compgen -f -- "$cur"))
            }
            complete -F _fusion_node fusion-node
            """
    }
}
