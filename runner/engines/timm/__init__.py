"""The image engine: a timm CNN fine-tuned or trained from scratch on the decoded-image cache.

One package behind the engine interface; nothing outside it imports its modules (the registry names
`engine:Timm`). Its parts, in the order a run meets them:
- `ladder`: the (model, size) candidates, best first; `costs`: their typed costs;
- `estimates`: memory and FLOPs found by running a model forward on the CPU, and the ones kept in
  `ladder_costs.json`; `measure`: the measuring process, a few real steps timed; `measuring`: the supervisor's
  side of it (started while the data is read, its request, its deadline, what it wrote);
- `settings`: `ImageSettings` and the memory rules planning and training share; `planning`: the member sized for
  the hardware, the window and the data (pure);
- `images`: the decoded-image cache (`prepare`); `loading`: loaders over it; `augment`: crops on the device;
- `memory`: the memory estimate, the batch probe and OOM back-off; `training`: one fold's loop.
"""
