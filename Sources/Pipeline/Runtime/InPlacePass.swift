import MessageBus

/// The in-place path of an `InPlaceTransform` (see there), with its buffers reused across messages.
struct InPlacePass {
    let transform: InPlaceTransform?
    var views: [WireFrame.View] = []
    var samples: [InPlaceSample] = []
    /// Frames added by the stage, each after the input frame at the same index of `positions`.
    var added: [WireFrame] = []
    var positions: [Int] = []
    /// What to publish for the last message besides the message itself (see `run`).
    var output: [WireFrame] = []

    init(_ transform: TransformLogic) {
        self.transform = transform as? InPlaceTransform
    }

    /// Handles `message` in place if the stage and every frame allow it; nil when the message needs
    /// the general path, with nothing changed. Otherwise returns the number of frames read and the
    /// message to pass on as it is (patched; a private copy when the stage writes and the content is
    /// shared), or nil with `output` holding the frames to publish instead: the stage's new frames,
    /// or, when a passing stage added some (status), the message's frames with those inserted right
    /// after the frame that caused them, exactly as the general path orders them.
    mutating func run(_ message: BusMessage) throws -> (message: BusMessage?, frames: Int)? {
        guard let transform, case .inPlace(let mode) = transform.inputHandling else { return nil }
        views.removeAll(keepingCapacity: true)
        samples.removeAll(keepingCapacity: true)
        added.removeAll(keepingCapacity: true)
        positions.removeAll(keepingCapacity: true)
        output.removeAll(keepingCapacity: true)
        guard WireFrame.views(in: message.bytes, into: &views) else { return nil }
        for view in views {
            guard let sample = transform.inPlaceSample(view) else { return nil }
            samples.append(sample)
        }
        var target = message
        if mode == .patchedMessage && message.isShared {
            target = try message.unsharedCopy()
            views.removeAll(keepingCapacity: true)
            _ = WireFrame.views(in: target.bytes, into: &views)  // same layout, now in the copy
        }
        for i in views.indices {
            let before = added.count
            try transform.apply(samples[i], to: views[i], extra: &added)
            for _ in before..<added.count { positions.append(i) }
        }
        guard mode != .ownFramesOnly else {
            output = added
            return (nil, views.count)
        }
        if added.isEmpty { return (target, views.count) }
        var next = 0
        for (i, view) in views.enumerated() {
            output.append(
                WireFrame(
                    topic: view.topic, type: view.type, encoding: view.encoding,
                    payload: Array(UnsafeRawBufferPointer(view.payload))))
            while next < added.count && positions[next] == i {
                output.append(added[next])
                next += 1
            }
        }
        return (nil, views.count)
    }
}
