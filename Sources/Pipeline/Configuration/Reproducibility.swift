import MessageBus

/// Which streams of a pipeline are the same every time from their start, and so what a restarted
/// stage can rebuild exactly (docs/security.md, "Restarts").
extension PipelineConfig {
    /// Source types whose output depends on nothing but their settings: a bag, the seeded simulator.
    static let reproducibleSourceTypes: Set<String> = ["bag", "simulator"]

    /// Whether `stage`'s output is the same every time from its start: a reproducible source, or a
    /// transform with one input whose output is (with several inputs, the order frames arrive in
    /// depends on timing).
    public func isReproducible(_ stage: String) -> Bool { reproducibleStages().contains(stage) }

    /// Every stage `isReproducible` is true of, in one pass over the stages in dependency order (the
    /// order a validated pipeline keeps; linear, where asking stage by stage walked each chain again).
    func reproducibleStages() -> Set<String> {
        var reproducible = Set<String>()
        for s in stages {
            let yes =
                s.type.isSource
                ? Self.reproducibleSourceTypes.contains(s.type.name)
                : s.type.role == .transform && s.inputs.count == 1 && reproducible.contains(s.inputs[0])
            if yes { reproducible.insert(s.name) }
        }
        return reproducible
    }

    /// How `stage` reads the numbering of its inputs.
    func inputNumbering(of stage: String) -> InputSequence.Numbering {
        guard let s = self.stage(named: stage), s.inputs.count == 1, isReproducible(s.inputs[0]) else { return .live }
        return .reproducible
    }

    /// For a restarted `stage` that recomputes its input: the stages from the source to its input,
    /// source first, with pacing and progress bars off. Nil when it cannot (see `RestartBehaviour`).
    func recomputation(for stage: String) -> [StageConfig]? {
        guard let s = self.stage(named: stage), s.type.restart == .recomputesInput,
            inputNumbering(of: stage) == .reproducible
        else { return nil }
        var chain: [StageConfig] = []
        var next: String? = s.inputs[0]
        while let name = next, var upstream = self.stage(named: name) {
            if upstream.type.isSource { upstream.settings.unpaced() }
            chain.insert(upstream, at: 0)
            next = upstream.inputs.first
        }
        return chain
    }

    /// Whether restarting `stage` loses nothing: a reproducible source plays again (its readers
    /// drop what they already have), a stage that recomputes its input rebuilds its state, and a
    /// file sink of a live stream continues from its inputs' retransmit buffers (unless the restart
    /// took longer than they hold: then the replacement itself reports the loss, exit 3).
    public func restartIsLossless(_ stage: String) -> Bool {
        guard let s = self.stage(named: stage) else { return false }
        if s.type.isSource { return isReproducible(stage) }
        if recomputation(for: stage) != nil { return true }
        return s.type.continuesFromRetransmission && s.inputs.allSatisfy { retransmitEndpoint(of: $0) != nil }
    }
}

extension StageSettings {
    /// As fast as possible and quiet: for a recomputation, whose frames the live stream has already
    /// paced.
    mutating func unpaced() {
        if numbers["rate"] != nil { numbers["rate"] = 0 }
        if numbers["realtime"] != nil { numbers["realtime"] = 0 }
        if numbers["progress"] != nil { numbers["progress"] = 0 }
    }
}
