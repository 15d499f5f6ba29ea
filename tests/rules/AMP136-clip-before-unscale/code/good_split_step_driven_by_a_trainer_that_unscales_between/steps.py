# A training step split over two methods: `forward_backward` scales the loss, `do_step` clips and steps. Another
# file drives them, and unscales between the two (a note: this file cannot show it).
import torch


class Step:
    def __init__(self, model, optimizer, clip=1.0):
        self.model, self.optimizer, self.clip = model, optimizer, clip
        self.scaler = torch.amp.GradScaler("cuda")

    def forward_backward(self, batch):
        with torch.autocast("cuda", dtype=torch.float16):
            loss = self.model(batch).float().mean()
        self.scaler.scale(loss).backward()
        return loss

    def do_step(self):
        torch.nn.utils.clip_grad_norm_(self.model.parameters(), self.clip)  # ampdoctor: expect[AMP136:info]
        self.scaler.step(self.optimizer)
        self.scaler.update()
        self.optimizer.zero_grad()
